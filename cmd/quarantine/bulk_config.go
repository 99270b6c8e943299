package main

import (
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// EnvBulkConfirmAbove overrides bulk.confirm_above.
const EnvBulkConfirmAbove = "QUARANTINE_BULK_CONFIRM_ABOVE"

// BulkConfig is the `bulk:` key: the confirmation of bulk actions.
type BulkConfig struct {
	// ConfirmAbove is how many messages a replay started at once may
	// select without expect_count, the count the operator previewed
	// (0: always without).
	ConfirmAbove int
}

type fileBulk struct {
	ConfirmAbove *int `yaml:"confirm_above"`
}

func defaultBulkConfig() BulkConfig {
	return BulkConfig{ConfirmAbove: quarantine.DefaultConfirmAbove}
}

// decodeBulk reads `bulk:` into b.
func (s *configSource) decodeBulk(f fileBulk, b *BulkConfig) error {
	if f.ConfirmAbove == nil {
		return nil
	}
	return s.setConfirmAbove(*f.ConfirmAbove, b)
}

// bulkFromEnv applies QUARANTINE_BULK_CONFIRM_ABOVE to b when it is set.
func (s *configSource) bulkFromEnv(env func(string) string, b *BulkConfig) error {
	v := env(EnvBulkConfirmAbove)
	if v == "" {
		return nil
	}
	s.origin["bulk.confirm_above"] = EnvBulkConfirmAbove
	n, err := strconv.Atoi(v)
	if err != nil {
		return s.errorf("bulk.confirm_above", "must be a whole number of messages")
	}
	return s.setConfirmAbove(n, b)
}

func (s *configSource) setConfirmAbove(n int, b *BulkConfig) error {
	if n < 0 {
		return s.errorf("bulk.confirm_above", "must be 0 (no confirmation) or more")
	}
	b.ConfirmAbove = n
	return nil
}
