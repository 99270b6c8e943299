package replay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// BenchmarkReplayRate replays through the engine on the embedded SQLite
// store to an in-memory broker at several rates and reports the achieved
// rate over the configured one, measured where the messages arrive: after
// the initial burst, (n - burst) messages in the time between the first
// and the last arrival.
//
//	go test -run '^$' -bench ReplayRate -benchtime=1x ./replay/
func BenchmarkReplayRate(b *testing.B) {
	for _, rate := range []float64{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("rate=%g", rate), func(b *testing.B) {
			// About 6 s of messages, at least 60.
			n := min(max(int(rate*6), 60), quarantine.MaxBulk)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f := newFixture(b)
				ids := f.insert(n)
				burst := max(int(rate/10), 1)
				f.engine(replay.Config{Poll: 10 * time.Millisecond})
				b.StartTimer()
				bt := f.create(ids, quarantine.ReplayRequest{Rate: rate, Burst: burst})
				f.waitState(bt.ID, time.Duration(float64(n)/rate*3+30)*time.Second, quarantine.ReplayCompleted)
				b.StopTimer()
				got := f.broker.Messages("orders")
				if len(got) != n {
					b.Fatalf("%d published, want %d", len(got), n)
				}
				span := got[len(got)-1].At.Sub(got[0].At).Seconds()
				achieved := float64(n-burst) / span
				b.ReportMetric(achieved, "msg/s")
				b.ReportMetric(achieved/rate, "achieved/configured")
			}
		})
	}
}
