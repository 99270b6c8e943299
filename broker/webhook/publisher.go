package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/broker/internal/publisher"
	"github.com/quarantine-dev/quarantine/internal/redacturl"
	"github.com/quarantine-dev/quarantine/replay"
	"github.com/quarantine-dev/quarantine/worker"
)

var _ replay.Publisher = (*Publisher)(nil)

const (
	// DefaultTimeout bounds one POST, from dial to the end of the answer.
	DefaultTimeout = 30 * time.Second
	// Parallel is how many POSTs one Publish call has in flight at most.
	Parallel = 8
	// reasonBytes is how much of a refusal's body the reason quotes.
	reasonBytes = 200
	// drainBytes is how much of an answer is read so that the connection
	// can be reused.
	drainBytes = 64 << 10
)

// replayHeaders are sent as HTTP headers as well as in the envelope.
var replayHeaders = []string{replay.HeaderReplayID, replay.HeaderReplayedBy, replay.HeaderOriginalID,
	replay.HeaderIdempotencyKey, replay.HeaderJobName}

// Config is one HTTP destination.
//
// Token is a secret: String, GoString and LogValue never print it.
type Config struct {
	// URL receives the POSTs (http or https).
	URL string `yaml:"url"`
	// Token, when set, is sent as Authorization: Bearer TOKEN.
	Token string `yaml:"-"`
	// TokenFile names a file holding the token (surrounding white space
	// is ignored); read once by NewPublisher. Not together with Token.
	TokenFile string `yaml:"token_file"`
	// Timeout bounds each POST (default DefaultTimeout).
	Timeout time.Duration `yaml:"timeout"`
}

// Validate checks c. Errors are EINVALID and name the key ("url",
// "token_file", "timeout").
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case strings.TrimSpace(c.URL) == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "an http destination needs url: http(s)://HOST/PATH")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "url", "%s is not an http(s) URL", redacturl.URL(c.URL))
	case c.Token != "" && c.TokenFile != "":
		return quarantine.FieldErrorf(quarantine.EINVALID, "token_file", "set a token or token_file, not both")
	case c.Timeout < 0:
		return quarantine.FieldErrorf(quarantine.EINVALID, "timeout", "timeout must be positive, got %s", c.Timeout)
	}
	return nil
}

// String describes c without the token.
func (c Config) String() string {
	tok := ""
	if c.Token != "" || c.TokenFile != "" {
		tok = ", token: <secret>"
	}
	return fmt.Sprintf("webhook{url: %s%s, timeout: %s}", redacturl.URL(c.URL), tok, c.Timeout)
}

// GoString is String, so that %#v does not print the token either.
func (c Config) GoString() string { return c.String() }

// LogValue logs c without the token.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", redacturl.URL(c.URL)), slog.Bool("token", c.Token != "" || c.TokenFile != ""),
		slog.String("token_file", c.TokenFile), slog.Duration("timeout", c.Timeout))
}

// Publisher POSTs replayed messages to one URL. Safe for concurrent use.
type Publisher struct {
	url    string
	token  string
	client *http.Client
	log    *slog.Logger

	closeOnce sync.Once
}

// NewPublisher returns a publisher to cfg.URL; name identifies it in the
// logs. It reads cfg.TokenFile, and returns an EINVALID *quarantine.Error
// when cfg is not valid or the token file cannot be read or is empty.
func NewPublisher(cfg Config, name string, logger *slog.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tok := cfg.Token
	if cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, &quarantine.Error{Code: quarantine.EINVALID, Field: "token_file", Err: err,
				Message: fmt.Sprintf("cannot read the token file %s", cfg.TokenFile)}
		}
		if tok = strings.TrimSpace(string(b)); tok == "" {
			return nil, quarantine.FieldErrorf(quarantine.EINVALID, "token_file", "the token file %s is empty", cfg.TokenFile)
		}
	}
	if !validHeaderValue(tok) {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "token_file", "the token holds control characters")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = Parallel
	client := &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A redirect is an answer: a replay is never re-sent elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Publisher{url: cfg.URL, token: tok, client: client,
		log: publisher.Log(logger, "webhook", name)}, nil
}

// Publish implements replay.Publisher: one POST per message, up to
// Parallel at a time. Errors in Results are *quarantine.Error values:
// EINVALID for a refusal (the status and the start of the body), or
// EUNAVAILABLE for what may work later.
func (p *Publisher) Publish(ctx context.Context, msgs []replay.Outgoing) []replay.Result {
	res := make([]replay.Result, len(msgs))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i := range msgs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < len(msgs); j++ {
				res[j] = pending(ctx.Err(), 0, "not sent: %v", ctx.Err())
			}
			wg.Wait()
			return res
		}
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = p.post(ctx, &msgs[i])
		})
	}
	wg.Wait()
	return res
}

// post sends one message and classifies the answer.
func (p *Publisher) post(ctx context.Context, o *replay.Outgoing) replay.Result {
	body, err := quarantine.MarshalEnvelope(envelopeMessage(o), o.Payload, o.Headers)
	if err != nil {
		return replay.Result{Outcome: quarantine.ItemFailed, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return replay.Result{Outcome: quarantine.ItemFailed, Err: quarantine.Internal(err, "webhook: cannot build the request")}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "quarantine-replay")
	key := o.IdempotencyKey
	if key == "" {
		key = o.MessageID
	}
	if validHeaderValue(key) && key != "" {
		h.Set("Idempotency-Key", key)
	}
	if p.token != "" {
		h.Set("Authorization", "Bearer "+p.token)
	}
	for _, k := range replayHeaders {
		if v, ok := o.Headers[k]; ok && v != "" && validHeaderValue(v) {
			h.Set(k, v)
		}
	}
	if _, ok := o.Headers[replay.HeaderIdempotencyKey]; !ok && o.IdempotencyKey != "" && validHeaderValue(o.IdempotencyKey) {
		h.Set(replay.HeaderIdempotencyKey, o.IdempotencyKey)
	}

	resp, err := p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a secret
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return pending(err, 0, "POST %s: %s", redacturl.URL(p.url), netReason(err))
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, reasonBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return replay.Result{Outcome: quarantine.ItemPublished}
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return pending(nil, wait, "POST %s: %s", redacturl.URL(p.url), resp.Status)
	case code == http.StatusRequestTimeout || code >= 500:
		return pending(nil, 0, "POST %s: %s", redacturl.URL(p.url), resp.Status)
	default:
		msg := fmt.Sprintf("webhook: POST %s: %s", redacturl.URL(p.url), resp.Status)
		if s := sanitize(head); s != "" {
			msg += ": " + s
		}
		return replay.Result{Outcome: quarantine.ItemFailed, Err: &quarantine.Error{Code: quarantine.EINVALID, Message: msg}}
	}
}

// envelopeMessage is the message the envelope describes: the quarantined
// one (or what the Outgoing says when there is none), with the fresh
// transport id, the destination queue and the Outgoing's key, job name and
// content type.
func envelopeMessage(o *replay.Outgoing) *quarantine.Message {
	var m quarantine.Message
	if o.Message != nil {
		m = *o.Message
	}
	m.MessageID = o.MessageID
	m.Queue = o.Queue
	m.IdempotencyKey = o.IdempotencyKey
	if o.JobName != "" {
		m.JobName = o.JobName
	}
	if o.ContentType != "" {
		m.ContentType = o.ContentType
	}
	return &m
}

// retryAfter is the wait a Retry-After value asks for (worker.ParseRetryAfter:
// delay-seconds or an HTTP date), in whole seconds, at most a day; 0 when
// it asks for none or is neither form.
func retryAfter(v string, now time.Time) time.Duration {
	d, _ := worker.ParseRetryAfter(v, now)
	return min(d, 24*time.Hour).Round(time.Second)
}

func pending(cause error, wait time.Duration, format string, args ...any) replay.Result {
	return replay.Result{Outcome: quarantine.ItemPending, RetryAfter: wait, Err: &quarantine.Error{
		Code: quarantine.EUNAVAILABLE, Message: "webhook: " + fmt.Sprintf(format, args...), Err: cause}}
}

// netReason says briefly why a request got no answer.
func netReason(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return sanitize([]byte(err.Error()))
}

// sanitize makes untrusted bytes fit for a reason: valid UTF-8, control
// characters as spaces, at most reasonBytes bytes.
func sanitize(b []byte) string {
	if len(b) > reasonBytes {
		b = b[:reasonBytes]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// validHeaderValue reports whether v can be sent as an HTTP header value
// (no control characters but tab).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// redactURL drops a URL's credentials and query (where tokens hide).

// Close releases idle connections.
func (p *Publisher) Close() error {
	p.closeOnce.Do(p.client.CloseIdleConnections)
	return nil
}
