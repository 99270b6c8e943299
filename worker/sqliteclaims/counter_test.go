package sqliteclaims_test

import "sync/atomic"

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int64 { return c.n.Add(1) }
