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

// Range fills an unset lower bound (as Positive does) and then an upper
// bound below it: the upper becomes the larger of its default and the
// lower, so a configured floor above the default ceiling still holds.
func Range[T ~int | ~int64 | ~float64](lo, hi *T, dlo, dhi T) {
	Positive(lo, dlo)
	if *hi < *lo {
		*hi = max(dhi, *lo)
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
