package rabbitmq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// stringHeaders turns AMQP headers into strings: strings as they are, any
// other value JSON-encoded. clean is false when a name or a value is not
// valid UTF-8 or holds NUL (the store then replaces those bytes).
func stringHeaders(t amqp.Table) (h map[string]string, clean bool) {
	clean = true
	if len(t) == 0 {
		return nil, clean
	}
	h = make(map[string]string, len(t))
	for k, v := range t {
		s := headerString(v)
		if !textOK(k) || !textOK(s) {
			clean = false
		}
		h[k] = s
	}
	return h, clean
}

// headerString renders one header value as text: a string (or a byte
// array that is valid UTF-8) as it is, anything else as the JSON that
// encoding/json gives for it (tables with sorted keys, timestamps in RFC
// 3339), and a value JSON cannot hold (NaN, infinities) as fmt prints it.
func headerString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
	}
	if b, ok := appendJSON(nil, v); ok {
		return string(b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// appendJSON is a fast path of json.Marshal for the values AMQP tables
// usually hold (x-death above all). It gives up (ok false) on anything
// whose encoding it does not reproduce exactly.
func appendJSON(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int8:
		return strconv.AppendInt(b, int64(x), 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case time.Time:
		if y := x.Year(); y < 0 || y > 9999 {
			return b, false
		}
		b = append(b, '"')
		b = x.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"'), true
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case amqp.Table:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendString(b, k); !ok {
				return b, false
			}
			b = append(b, ':')
			if b, ok = appendJSON(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendString quotes s when it needs no escaping beyond what it is;
// anything else (control bytes, quotes, backslashes, HTML characters,
// non-ASCII) is left to encoding/json.
func appendString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}
