package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/replay"
)

// CollectorConfig is one entry of `collectors:`: the keys every kind
// shares, and the opener its broker package validated.
type CollectorConfig struct {
	Name      string
	Kind      string
	BatchSize int
	Linger    time.Duration
	Commits   int
	// open builds the broker source (it does not dial: the first Receive
	// does). Set when the entry was decoded and validated.
	open func(deps collectorDeps) (collect.Source, error)
	// publisher builds the broker's replay publisher (it dials lazily).
	publisher func(deps collectorDeps) (replay.Publisher, error)
}

// collectorDeps is what a source may need from the wiring besides its
// own configuration.
type collectorDeps struct {
	logger *slog.Logger
	audit  func(context.Context, quarantine.AuditEvent) error
}

// brokerOpeners build a collector's source and its replay publisher.
type brokerOpeners struct {
	source    func(collectorDeps) (collect.Source, error)
	publisher func(collectorDeps) (replay.Publisher, error)
}

// brokerKind decodes and validates the broker-specific keys of one entry.
type brokerKind func(name string, raw []byte) (brokerOpeners, error)

// brokerKinds holds every collector kind; each broker package adds one
// entry in brokers.go.
var brokerKinds = map[string]brokerKind{}

// validatable is a broker Config.
type validatable interface{ Validate() error }

// decodeBroker strictly decodes raw into a broker's Config and validates
// it. Errors name the key relative to the entry.
func decodeBroker[C any, PC interface {
	*C
	validatable
}](raw []byte) (C, error) {
	var c C
	if err := yaml.UnmarshalWithOptions(raw, &c, yaml.Strict()); err != nil {
		var ye yaml.Error
		msg := err.Error()
		key := ""
		if errors.As(err, &ye) && ye.GetToken() != nil {
			key = ye.GetToken().Value
			msg = ye.GetMessage()
		}
		return c, quarantine.FieldErrorf(quarantine.EINVALID, key, "%s", firstLine(msg))
	}
	if err := PC(&c).Validate(); err != nil {
		return c, err
	}
	return c, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// sharedCollectorKeys are decoded by the wiring, not by the broker.
var sharedCollectorKeys = []string{"name", "kind", "batch_size", "linger", "commits"}

// decodeCollectors turns the raw `collectors:` entries into validated
// configs. Errors name collectors[i].key.
func (s *configSource) decodeCollectors(raw []map[string]any) ([]CollectorConfig, error) {
	out := make([]CollectorConfig, 0, len(raw))
	seen := map[string]bool{}
	for i, entry := range raw {
		key := fmt.Sprintf("collectors[%d]", i)
		c := CollectorConfig{BatchSize: collect.DefaultBatchSize, Linger: collect.DefaultLinger, Commits: collect.DefaultCommits}
		name, _ := entry["name"].(string)
		if strings.TrimSpace(name) == "" || len(name) > 100 || strings.ContainsAny(name, "\x00\r\n") {
			return nil, s.errorf(key+".name", "every collector needs a name (one line, at most 100 bytes)")
		}
		if seen[name] {
			return nil, s.errorf(key+".name", "collector name %q is used twice", name)
		}
		seen[name] = true
		c.Name = name
		if err := s.intSetting(entry, key, "batch_size", 1, 10000, &c.BatchSize); err != nil {
			return nil, err
		}
		if v, ok := entry["linger"]; ok {
			d, err := configDuration(v)
			if err != nil || d <= 0 || d > time.Minute {
				return nil, s.errorf(key+".linger", "linger must be a duration between 1ms and 1m, like 200ms")
			}
			c.Linger = d
		}
		if err := s.intSetting(entry, key, "commits", 1, 16, &c.Commits); err != nil {
			return nil, err
		}
		c.Kind, _ = entry["kind"].(string)
		kind, ok := brokerKinds[c.Kind]
		if !ok {
			return nil, s.errorf(key+".kind", "unknown kind %q (one of %s)", c.Kind, strings.Join(kindNames(), ", "))
		}
		rest := map[string]any{}
		for k, v := range entry {
			if !isShared(k) {
				rest[k] = v
			}
		}
		b, err := yaml.Marshal(rest)
		if err != nil {
			return nil, s.errorf(key, "cannot read this entry: %v", err)
		}
		ops, err := kind(name, b)
		if err != nil {
			field := quarantine.ErrorField(err)
			if field == "" {
				return nil, s.errorf(key, "%s", quarantine.ErrorMessage(err))
			}
			return nil, s.errorf(key+"."+field, "%s", quarantine.ErrorMessage(err))
		}
		c.open, c.publisher = ops.source, ops.publisher
		out = append(out, c)
	}
	return out, nil
}

func isShared(k string) bool {
	for _, s := range sharedCollectorKeys {
		if k == s {
			return true
		}
	}
	return false
}

// intSetting sets *dst to entry's integer name, when present, refusing
// one outside lo..hi (the error names key.name).
func (s *configSource) intSetting(entry map[string]any, key, name string, lo, hi int, dst *int) error {
	v, ok := entry[name]
	if !ok {
		return nil
	}
	n, isInt := toInt(v)
	if !isInt || n < lo || n > hi {
		return s.errorf(key+"."+name, "%s must be an integer between %d and %d", name, lo, hi)
	}
	*dst = n
	return nil
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		return int(n), true
	}
	return 0, false
}

func kindNames() []string {
	var names []string
	for k := range brokerKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// runningCollectors are the collectors of one serve.
type runningCollectors struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	sources    []collect.Source
	collectors []*collect.Collector
}

// collectorDeps is what sources and publishers get from the wiring.
func (m *Main) collectorDeps() collectorDeps {
	return collectorDeps{logger: m.logger, audit: func(ctx context.Context, e quarantine.AuditEvent) error {
		_, err := m.store.AppendAudit(ctx, e)
		return err
	}}
}

// startCollectors starts one goroutine per configured collector.
func (m *Main) startCollectors(prep *collect.Preparer, metrics *collect.Metrics) error {
	rc := &runningCollectors{}
	ctx, cancel := context.WithCancel(context.Background())
	rc.cancel = cancel
	m.collectors = rc
	deps := m.collectorDeps()
	for _, cc := range m.Config.Collectors {
		src, err := cc.open(deps)
		if err != nil {
			return fmt.Errorf("collector %s: %w", cc.Name, err)
		}
		c := collect.New(collect.Config{
			Name: cc.Name, Source: src, Store: m.store, Preparer: prep,
			BatchSize: cc.BatchSize, Linger: cc.Linger, Commits: cc.Commits, Logger: m.logger, Metrics: metrics,
		})
		rc.sources = append(rc.sources, src)
		rc.collectors = append(rc.collectors, c)
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			_ = c.Run(ctx)
		}()
	}
	return nil
}

// stop ends every collector (each finishes its batch in flight) and
// closes the sources, side by side: a source may let its broker calls in
// flight end first (an SQS long poll, up to a few seconds).
func (rc *runningCollectors) stop() error {
	if rc == nil {
		return nil
	}
	rc.cancel()
	rc.wg.Wait()
	errs := make([]error, len(rc.sources))
	var wg sync.WaitGroup
	for i, s := range rc.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Close()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing collectors: %w", err)
	}
	return nil
}
