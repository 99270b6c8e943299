package rabbitmq

import (
	"log/slog"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
)

// connect dials url as the client named client ("quarantine collector
// NAME": the connection name the management UI shows), with a 10 s
// heartbeat; dial opens the TCP connection.
func connect(url, client string, dial func(network, addr string) (net.Conn, error)) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{
		Dial:       dial,
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": client},
	})
	if err != nil {
		return nil, unavailable(err, "cannot connect to RabbitMQ at %s", redacturl.URL(url))
	}
	return conn, nil
}

// confirmChannel opens a channel on conn in confirm mode; what names the
// channel in the error. A channel that cannot take confirm mode is
// closed.
func confirmChannel(conn *amqp.Connection, what string) (*amqp.Channel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, unavailable(err, "cannot open %s", what)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, unavailable(err, "cannot put the channel in confirm mode")
	}
	return ch, nil
}

// checkShort refuses what AMQP cannot carry: fields (a description and
// a value each, checked in order) and header names are short strings of
// at most 255 bytes. (A longer one would fail the frame half written.)
func checkShort(headers map[string]string, fields ...[2]string) error {
	bad := ""
	for _, f := range fields {
		if len(f[1]) > maxNameBytes {
			bad = f[0]
			break
		}
	}
	for k := range headers {
		if bad == "" && len(k) > maxNameBytes {
			bad = "a header name"
		}
	}
	if bad == "" {
		return nil
	}
	return quarantine.Errorf(quarantine.EINVALID, "rabbitmq: %s is longer than %d bytes, which AMQP cannot carry", bad, maxNameBytes)
}

// persistent is a persistent message: body, its headers and content
// type, the message id as message_id, the job name as type, stamped ts.
func persistent(h amqp.Table, contentType, id, jobName string, ts time.Time, body []byte) amqp.Publishing {
	return amqp.Publishing{
		Headers:      h,
		ContentType:  contentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    id,
		Timestamp:    ts,
		Type:         jobName,
		Body:         body,
	}
}

// now is the timestamp of a message sent now: UTC, whole seconds (what
// AMQP carries).
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// forget clears *live when it is still s, closing s's connection, after
// a failure (cause): the next use (next: "publish", "call") dials again.
func forget[S interface {
	comparable
	connection() *amqp.Connection
}](live *S, s S, log *slog.Logger, cause error, next string) {
	if *live != s {
		return
	}
	var none S
	*live = none
	_ = s.connection().Close()
	log.Warn("lost the connection to RabbitMQ: the next "+next+" dials again", "err", cause)
}

func (s *pubSession) connection() *amqp.Connection  { return s.conn }
func (s *workSession) connection() *amqp.Connection { return s.conn }
