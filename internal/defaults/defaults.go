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

// Zero sets *v to d when *v is the zero value ("" or 0): the rule of the
// configurations whose Validate refuses a negative value rather than
// taking the default for it.
func Zero[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
