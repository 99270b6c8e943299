package main

import (
	"strconv"

	"github.com/quarantine-dev/quarantine"
)

// EnvBulkConfirmAbove sets bulk.confirm_above.
const EnvBulkConfirmAbove = "QUARANTINE_BULK_CONFIRM_ABOVE"

// BulkConfig holds the settings of bulk actions (config bulk:).
type BulkConfig struct {
	// ConfirmAbove: a bulk action by filter matching more messages needs
	// expect_count, the count the operator previewed (default
	// quarantine.DefaultBulkConfirmAbove).
	ConfirmAbove int
}

type fileBulk struct {
	ConfirmAbove *int `yaml:"confirm_above"`
}

// decodeBulk reads `bulk:` into c, then $QUARANTINE_BULK_CONFIRM_ABOVE
// (it wins over the file).
func (s *configSource) decodeBulk(f fileBulk, env string, c *BulkConfig) error {
	if f.ConfirmAbove != nil {
		c.ConfirmAbove = *f.ConfirmAbove
	}
	if env != "" {
		n, err := strconv.Atoi(env)
		if err != nil {
			s.origin["bulk.confirm_above"] = EnvBulkConfirmAbove
			return s.errorf("bulk.confirm_above", "%q is not a whole number", env)
		}
		s.origin["bulk.confirm_above"] = EnvBulkConfirmAbove
		c.ConfirmAbove = n
	}
	if c.ConfirmAbove < 1 {
		return s.errorf("bulk.confirm_above", "%d must be at least 1", c.ConfirmAbove)
	}
	return nil
}

func defaultBulkConfig() BulkConfig {
	return BulkConfig{ConfirmAbove: quarantine.DefaultBulkConfirmAbove}
}
