package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/quarantine-dev/quarantine"
)

// newClient makes a client of the cluster of c: its connection options
// and opts. what names the client in the error ("producer", "client").
func (c Config) newClient(what string, opts ...kgo.Opt) (*kgo.Client, error) {
	conn, err := c.connOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(conn, opts...)...)
	if err != nil {
		return nil, quarantine.Internal(err, "kafka: cannot make a %s", what)
	}
	return cl, nil
}

// lazyClient is a client made on first use, until it is closed.
type lazyClient struct {
	mu     sync.Mutex
	cl     *kgo.Client
	closed bool
}

// get returns the client, made by make on first use. owner names what
// holds the client in the error once closed ("publisher", "source").
func (l *lazyClient) get(owner string, make func() (*kgo.Client, error)) (*kgo.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, quarantine.Errorf(quarantine.EUNAVAILABLE, "kafka: the %s is closed", owner)
	}
	if l.cl != nil {
		return l.cl, nil
	}
	cl, err := make()
	if err != nil {
		return nil, err
	}
	l.cl = cl
	return cl, nil
}

// current is the client made so far, nil for none.
func (l *lazyClient) current() *kgo.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cl
}

// close marks l closed and returns its client, nil for none, for the
// caller to close. forget drops it: current is nil afterwards.
func (l *lazyClient) close(forget bool) *kgo.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	cl := l.cl
	l.closed = true
	if forget {
		l.cl = nil
	}
	return cl
}
