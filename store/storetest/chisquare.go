package storetest

import "math"

// chiSquareQuantile returns the q-quantile of the chi-square distribution
// with df degrees of freedom, by bisection on its CDF (the regularised
// lower incomplete gamma function P(df/2, x/2)).
func chiSquareQuantile(df int, q float64) float64 {
	lo, hi := 0.0, float64(df)+100*math.Sqrt(float64(df))+100
	for range 200 {
		mid := (lo + hi) / 2
		if gammaP(float64(df)/2, mid/2) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// gammaP is the regularised lower incomplete gamma function P(a, x): its
// series for x < a+1, and one minus the continued fraction of Q otherwise
// (Numerical Recipes, 6.2).
func gammaP(a, x float64) float64 {
	if x <= 0 {
		return 0
	}
	lg, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return sum * math.Exp(-x+a*math.Log(x)-lg)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return 1 - math.Exp(-x+a*math.Log(x)-lg)*h
}
