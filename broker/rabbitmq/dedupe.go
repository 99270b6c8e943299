package rabbitmq

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
)

// dedupeKey is the claim that makes a redelivery a no-op:
//
//	mid:<message_id>[/xdeath:<count>:<unix time>]   with a message_id
//	sha256:<hex of body and sorted headers>         without one
//
// A message_id that is not clean text or is long is hashed, so that the
// store's sanitising cannot merge two different ids. x-delivery-count is
// left out of the content hash: a quorum queue changes it on redelivery.
func dedupeKey(d *amqp.Delivery, dl deadLetter) string {
	if d.MessageId != "" {
		id := d.MessageId
		if !textOK(id) || len(id) > 200 {
			id = "sha256:" + quarantine.PayloadHash([]byte(id))
		}
		key := "mid:" + id
		if len(dl.deaths) > 0 && (dl.deaths[0].hasCount || dl.deaths[0].hasTime) {
			key += "/xdeath:" + strconv.FormatInt(dl.deaths[0].count, 10) + ":" + strconv.FormatInt(dl.deaths[0].time.Unix(), 10)
		}
		return key
	}
	return "sha256:" + contentHash(d.Body, d.Headers)
}

// contentHash is the SHA-256 of the body and the headers in a canonical,
// unambiguous form: each part length-prefixed, headers sorted by name,
// values as stringHeaders renders them.
func contentHash(body []byte, headers amqp.Table) string {
	h := sha256.New()
	writePart(h, body)
	names := make([]string, 0, len(headers))
	for k := range headers {
		if k != headerDeliveryCount {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		writePart(h, []byte(k))
		writePart(h, []byte(headerString(headers[k])))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writePart(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}
