package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes a size may carry: SI (powers of 1000) and
// IEC (powers of 1024). Matching ignores case.
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"b", 1},
}

// parseSize reads a byte size from a YAML value: an integer (bytes) or a
// string such as "10MiB", "512 KiB", "1MB" or "2048". It returns a problem
// text for an error message when the value is not a positive size.
func parseSize(v any) (int64, string) {
	switch x := v.(type) {
	case int:
		return positive(int64(x))
	case int64:
		return positive(x)
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Sprintf("%d is too large", x)
		}
		return positive(int64(x))
	case float64:
		if x != math.Trunc(x) || x > math.MaxInt64 {
			return 0, fmt.Sprintf("%v is not a whole number of bytes", x)
		}
		return positive(int64(x))
	case string:
		return parseSizeString(x)
	}
	return 0, fmt.Sprintf("%v is not a size (write bytes, or a string like \"10MiB\")", v)
}

func parseSizeString(s string) (int64, string) {
	bad := fmt.Sprintf("%q is not a size (write bytes, or a number with B, KB, KiB, MB, MiB, GB or GiB)", s)
	t := strings.ToLower(strings.TrimSpace(s))
	factor := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, factor = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, bad
	}
	if n > math.MaxInt64/factor {
		return 0, fmt.Sprintf("%q is too large", s)
	}
	return positive(n * factor)
}

func positive(n int64) (int64, string) {
	if n <= 0 {
		return 0, fmt.Sprintf("%d is not a positive size", n)
	}
	return n, ""
}
