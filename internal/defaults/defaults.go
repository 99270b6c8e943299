// Package defaults fills a configuration's unset values.
package defaults

// Positive sets *v to d when *v is zero or negative: the rule of every
// count and duration in the service's configurations, where 0 means "the
// default".
func Positive[T ~int | ~int64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
