package main

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// ReplayConfig is the `replay:` key: the defaults of a new batch and the
// engine's settings.
type ReplayConfig struct {
	Rate            float64       // default msg/s of a batch
	MaxRate         float64       // no batch may ask for more
	Burst           int           // default burst (0: rate/10, at least 1)
	Canary          int           // default canary size
	Observe         time.Duration // default canary observation
	HaltRefailRatio float64       // default breaker threshold (0: off)
	Lease           time.Duration // how long an engine holds an item
	DraftTTL        time.Duration // how long a dry run may wait to be started
	Poll            time.Duration // how often the engine looks for work
	MaxReplays      int           // a job replayed this often needs an admin (0: no cap)
	IncidentWindow  time.Duration // the incident guard's window (0: no guard)
	IncidentRate    float64       // new dead letters a minute above which the guard refuses
	PublishAttempts int           // offers of an item to a destination that refuses it for now
	RetryMin        time.Duration // the backoff after a refusal: full jitter from RetryMin,
	RetryMax        time.Duration // doubled per refusal, at most RetryMax
}

// Defaults of `replay:`.
func defaultReplayConfig() ReplayConfig {
	return ReplayConfig{
		Rate: quarantine.DefaultReplayRate, MaxRate: quarantine.DefaultReplayMaxRat,
		Canary: 5, Observe: 30 * time.Second, HaltRefailRatio: 0.2,
		Lease: replay.DefaultLease, DraftTTL: quarantine.DefaultDraftTTL, Poll: replay.DefaultPoll,
		MaxReplays: 3, IncidentWindow: 5 * time.Minute, IncidentRate: 1,
		PublishAttempts: replay.DefaultPublishAttempts, RetryMin: replay.DefaultRetryMin, RetryMax: replay.DefaultRetryMax,
	}
}

type fileReplay struct {
	Rate            *float64 `yaml:"rate"`
	MaxRate         *float64 `yaml:"max_rate"`
	Burst           *int     `yaml:"burst"`
	Canary          *int     `yaml:"canary"`
	Observe         any      `yaml:"observe"`
	HaltRefailRatio *float64 `yaml:"halt_refail_ratio"`
	Lease           any      `yaml:"lease"`
	DraftTTL        any      `yaml:"draft_ttl"`
	Poll            any      `yaml:"poll"`
	MaxReplays      *int     `yaml:"max_replays"`
	IncidentWindow  any      `yaml:"incident_window"`
	IncidentRate    *float64 `yaml:"incident_rate"`
	PublishAttempts *int     `yaml:"publish_attempts"`
	RetryMin        any      `yaml:"retry_min"`
	RetryMax        any      `yaml:"retry_max"`
}

// DestinationConfig is one entry of `destinations:`: the replays of the
// queues matching Queues go through another collector's broker, or to an
// HTTP receiver (kind http or cloudflare: POST of the canonical envelope).
// Token (inline) or TokenFile (read at start) is sent as Authorization:
// Bearer; not both.
type DestinationConfig struct {
	Queues    []string `yaml:"queues"`
	Collector string   `yaml:"collector"`
	Kind      string   `yaml:"kind"`
	URL       string   `yaml:"url"`
	Token     Secret   `yaml:"token"`
	TokenFile string   `yaml:"token_file"`
	Timeout   any      `yaml:"timeout"`
	timeout   time.Duration
}

// decodeReplay reads `replay:` into r.
func (s *configSource) decodeReplay(f fileReplay, r *ReplayConfig) error {
	floats := []struct {
		key string
		v   *float64
		dst *float64
		max float64
	}{
		{"replay.rate", f.Rate, &r.Rate, math.MaxFloat64},
		{"replay.max_rate", f.MaxRate, &r.MaxRate, math.MaxFloat64},
		{"replay.halt_refail_ratio", f.HaltRefailRatio, &r.HaltRefailRatio, 1},
		{"replay.incident_rate", f.IncidentRate, &r.IncidentRate, math.MaxFloat64},
	}
	for _, k := range floats {
		if k.v == nil {
			continue
		}
		if math.IsNaN(*k.v) || *k.v < 0 || *k.v > k.max || (*k.v == 0 && k.key != "replay.halt_refail_ratio" && k.key != "replay.incident_rate") {
			if k.max == 1 {
				return s.errorf(k.key, "must be between 0 and 1")
			}
			return s.errorf(k.key, "must be a positive number of messages per second")
		}
		*k.dst = *k.v
	}
	ints := []struct {
		key string
		v   *int
		dst *int
	}{{"replay.burst", f.Burst, &r.Burst}, {"replay.canary", f.Canary, &r.Canary}, {"replay.max_replays", f.MaxReplays, &r.MaxReplays}}
	for _, k := range ints {
		if k.v == nil {
			continue
		}
		if *k.v < 0 || *k.v > quarantine.MaxBulk {
			return s.errorf(k.key, "must be between 0 and %d", quarantine.MaxBulk)
		}
		*k.dst = *k.v
	}
	if f.PublishAttempts != nil {
		if *f.PublishAttempts < 1 || *f.PublishAttempts > 100 {
			return s.errorf("replay.publish_attempts", "must be between 1 and 100")
		}
		r.PublishAttempts = *f.PublishAttempts
	}
	durs := []struct {
		key      string
		v        any
		dst      *time.Duration
		min, max time.Duration
	}{
		{"replay.observe", f.Observe, &r.Observe, 0, quarantine.MaxReplayObserve},
		{"replay.lease", f.Lease, &r.Lease, time.Second, time.Hour},
		{"replay.draft_ttl", f.DraftTTL, &r.DraftTTL, time.Minute, 30 * 24 * time.Hour},
		{"replay.poll", f.Poll, &r.Poll, 10 * time.Millisecond, time.Minute},
		{"replay.incident_window", f.IncidentWindow, &r.IncidentWindow, 0, 24 * time.Hour},
		{"replay.retry_min", f.RetryMin, &r.RetryMin, time.Millisecond, time.Hour},
		{"replay.retry_max", f.RetryMax, &r.RetryMax, time.Millisecond, 24 * time.Hour},
	}
	for _, k := range durs {
		if k.v == nil {
			continue
		}
		d, err := configDuration(k.v)
		if err != nil || d < k.min || d > k.max {
			return s.errorf(k.key, "must be a duration between %s and %s, like 30s", k.min, k.max)
		}
		*k.dst = d
	}
	if r.RetryMin > r.RetryMax {
		return s.errorf("replay.retry_min", "%s is above replay.retry_max (%s)", r.RetryMin, r.RetryMax)
	}
	if r.Rate > r.MaxRate {
		return s.errorf("replay.rate", "%g is above replay.max_rate (%g)", r.Rate, r.MaxRate)
	}
	return nil
}

// validateDestinations checks `destinations:` against the collectors.
func (s *configSource) validateDestinations(ds []DestinationConfig, collectors []CollectorConfig) error {
	for i := range ds {
		d := &ds[i]
		key := fmt.Sprintf("destinations[%d]", i)
		if len(d.Queues) == 0 {
			return s.errorf(key+".queues", "a destination needs at least one queue pattern")
		}
		for j, q := range d.Queues {
			if _, err := path.Match(q, ""); err != nil || q == "" {
				return s.errorf(fmt.Sprintf("%s.queues[%d]", key, j), "bad glob pattern %q", q)
			}
		}
		switch {
		case d.Collector != "" && (d.Kind != "" || d.URL != "" || d.Token != "" || d.TokenFile != ""):
			return s.errorf(key+".collector", "give either collector or kind with url, not both")
		case d.Collector != "":
			found := false
			for _, c := range collectors {
				found = found || c.Name == d.Collector
			}
			if !found {
				return s.errorf(key+".collector", "no collector named %q", d.Collector)
			}
		case d.Kind == "http" || d.Kind == "cloudflare":
			if !strings.HasPrefix(d.URL, "http://") && !strings.HasPrefix(d.URL, "https://") {
				return s.errorf(key+".url", "an http destination needs an http:// or https:// url")
			}
			if d.Token != "" && d.TokenFile != "" {
				return s.errorf(key+".token", "give token or token_file, not both")
			}
			if strings.TrimSpace(d.Token.Reveal()) == "" && d.Token != "" {
				return s.errorf(key+".token", "the token is blank")
			}
			d.timeout = 10 * time.Second
			if d.Timeout != nil {
				t, err := configDuration(d.Timeout)
				if err != nil || t < 100*time.Millisecond || t > 5*time.Minute {
					return s.errorf(key+".timeout", "must be a duration between 100ms and 5m")
				}
				d.timeout = t
			}
		default:
			return s.errorf(key+".kind", "give collector, or kind http or cloudflare with url")
		}
	}
	return nil
}

// destinationName names an http destination in route labels.
func (d *DestinationConfig) destinationName(i int) string {
	return fmt.Sprintf("destinations[%d]", i)
}
