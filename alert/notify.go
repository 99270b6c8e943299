package alert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// Receiver kinds.
const (
	KindWebhook      = "webhook"      // the notification as JSON (WebhookBody)
	KindSlack        = "slack"        // a Slack-compatible incoming webhook: {"text": …}
	KindAlertmanager = "alertmanager" // POST {URL}/api/v2/alerts
)

// Receiver is where notifications go.
type Receiver struct {
	// Name identifies the receiver in the outbox; empty: the kind and a
	// hash of the URL (which may carry a secret, so it is not stored).
	Name string
	Kind string
	URL  string
	// Timeout of one delivery (default 10 s).
	Timeout time.Duration
	// Client sends the requests (default: a client with Timeout).
	Client *http.Client
}

// DefaultName is the name of a receiver given none.
func DefaultName(kind, url string) string {
	h := sha256.Sum256([]byte(url))
	return kind + "-" + hex.EncodeToString(h[:4])
}

func (r *Receiver) init() error {
	switch r.Kind {
	case KindWebhook, KindSlack, KindAlertmanager:
	default:
		return quarantine.FieldErrorf(quarantine.EINVALID, "receivers", "receiver kind %q is not webhook, slack or alertmanager", r.Kind)
	}
	if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
		return quarantine.FieldErrorf(quarantine.EINVALID, "receivers", "a %s receiver needs an http:// or https:// url", r.Kind)
	}
	if r.Name == "" {
		r.Name = DefaultName(r.Kind, r.URL)
	}
	if r.Timeout <= 0 {
		r.Timeout = 10 * time.Second
	}
	if r.Client == nil {
		r.Client = &http.Client{Timeout: r.Timeout}
	}
	return nil
}

// takes reports whether the receiver is sent notifications of kind:
// Alertmanager gets refreshes (it repeats by itself), the others repeats.
func (r *Receiver) takes(kind quarantine.AlarmKind) bool {
	switch kind {
	case quarantine.AlarmKindRepeat:
		return r.Kind != KindAlertmanager
	case quarantine.AlarmKindRefresh:
		return r.Kind == KindAlertmanager
	}
	return true
}

// DeliveryError is a failed delivery; Retry says whether trying again
// may help (network errors, 429 and 5xx) or not (other statuses).
type DeliveryError struct {
	Retry bool
	Err   error
}

func (e *DeliveryError) Error() string { return e.Err.Error() }
func (e *DeliveryError) Unwrap() error { return e.Err }

// WebhookBody is the JSON a webhook receiver gets. ID is the
// notification's id: a receiver may see one twice (after a crash between
// the POST and its record) and can deduplicate on it.
type WebhookBody struct {
	Version string `json:"version"` // "1"
	ID      int64  `json:"id"`
	Kind    string `json:"kind"` // firing, repeat or resolved
	quarantine.AlarmEvent
}

// alertmanagerAlert is one alert of Alertmanager's POST /api/v2/alerts.
type alertmanagerAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// body renders n for the receiver at now; hold is how far ahead a firing
// alert ends for Alertmanager unless re-sent.
func (r *Receiver) body(n quarantine.AlarmNotification, now time.Time, hold time.Duration) (string, []byte, error) {
	ev := n.Event
	switch r.Kind {
	case KindSlack:
		b, err := json.Marshal(map[string]string{"text": slackText(n)})
		return r.URL, b, err
	case KindAlertmanager:
		a := alertmanagerAlert{
			Labels:      map[string]string{"alertname": ev.Alarm, "queue": ev.Queue, "owner": ev.Owner, "service": "quarantine"},
			Annotations: map[string]string{"summary": summary(ev), "description": ev.Reason},
			StartsAt:    ev.StartsAt, EndsAt: now.Add(hold),
		}
		if ev.EndsAt != nil {
			a.EndsAt = *ev.EndsAt
		}
		if ev.Reason == "" {
			a.Annotations["description"] = "resolved"
		}
		if ev.URL != "" {
			a.Annotations["messages_url"], a.GeneratorURL = ev.URL, ev.URL
		}
		if ev.RunbookURL != "" {
			a.Annotations["runbook_url"] = ev.RunbookURL
		}
		b, err := json.Marshal([]alertmanagerAlert{a})
		return strings.TrimRight(r.URL, "/") + "/api/v2/alerts", b, err
	default:
		b, err := json.Marshal(WebhookBody{Version: "1", ID: n.ID, Kind: string(n.Kind), AlarmEvent: ev})
		return r.URL, b, err
	}
}

func summary(ev quarantine.AlarmEvent) string {
	owner := ev.Owner
	if owner == "" {
		owner = "no owner"
	}
	return fmt.Sprintf("dead letters of %s (%s): alarm %s", ev.Queue, owner, ev.Alarm)
}

func slackText(n quarantine.AlarmNotification) string {
	ev := n.Event
	var text string
	switch n.Kind {
	case quarantine.AlarmKindResolved:
		text = fmt.Sprintf(":white_check_mark: RESOLVED %s", summary(ev))
	case quarantine.AlarmKindRepeat:
		text = fmt.Sprintf(":rotating_light: STILL FIRING %s: %s", summary(ev), ev.Reason)
	default:
		text = fmt.Sprintf(":rotating_light: FIRING %s: %s", summary(ev), ev.Reason)
	}
	var links []string
	if ev.URL != "" {
		links = append(links, "<"+ev.URL+"|Open the messages>")
	}
	if ev.RunbookURL != "" {
		links = append(links, "<"+ev.RunbookURL+"|Runbook>")
	}
	if len(links) > 0 {
		text += "\n" + strings.Join(links, " · ")
	}
	return text
}

// Notify delivers n: nil on a 2xx answer, a *DeliveryError otherwise.
func (r *Receiver) Notify(ctx context.Context, n quarantine.AlarmNotification, now time.Time, hold time.Duration) error {
	url, b, err := r.body(n, now, hold)
	if err != nil {
		return &DeliveryError{Err: fmt.Errorf("cannot encode the notification: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return &DeliveryError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "quarantine-alert")
	if r.Kind == KindWebhook {
		req.Header.Set("Idempotency-Key", "quarantine-alarm-"+strconv.FormatInt(n.ID, 10))
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a secret
		}
		return &DeliveryError{Retry: true, Err: fmt.Errorf("POST %s: %w", r.Name, err)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout
	return &DeliveryError{Retry: retry, Err: fmt.Errorf("POST %s: %s", r.Name, resp.Status)}
}
