package collect

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// benchEnvelope is a canonical envelope of about 1 KiB.
var benchEnvelope = fmt.Appendf(nil, `{"envelope":"quarantine.failure/v1","job":{"id":"run-42","name":"charge-order","queue":"orders","idempotency_key":"order:run:42","schema_version":"3","attempts":5,"enqueued_at":"2026-01-02T02:04:05.123456Z","content_type":"application/json","headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x-idempotency-key":"order:run:42","x-schema-version":"3"},"payload":{"run":"run","order_id":42,"customer":"cust-000042","amount_cents":1234,"currency":"EUR","lines":[{"sku":"sku-42","qty":2}],"note":%q}},"failure":{"class":"exhausted","reason":"attempt 5 of 5 failed: payment gateway timeout after 30s (order 42)","failed_at":"2026-01-02T03:05:05.654321Z","first_failed_at":"2026-01-02T03:04:05Z"}}`,
	strings.Repeat("x", 560))

// BenchmarkDecodeEnvelope decodes one 1 KiB envelope with the one-pass
// decoder and with the encoding/json one it replaced.
//
//	go test -run '^$' -bench DecodeEnvelope -benchmem ./collect/
func BenchmarkDecodeEnvelope(b *testing.B) {
	o := Origin{Source: "bench", Kind: quarantine.SourceRabbitMQ}
	for _, c := range []struct {
		name string
		dec  func([]byte, Origin) (*quarantine.Message, []Problem)
	}{{"one-pass", DecodeEnvelope}, {"encoding-json", refDecodeEnvelope}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchEnvelope)))
			b.ReportAllocs()
			for b.Loop() {
				if m, p := c.dec(benchEnvelope, o); len(p) != 0 || m.FailureClass != quarantine.ClassExhausted {
					b.Fatalf("%+v %+v", m, p)
				}
			}
		})
	}
}
