package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"golang.org/x/term"

	apiclient "github.com/quarantine-dev/quarantine/client"
)

// requestTimeout bounds one request of a client command.
const requestTimeout = 30 * time.Second

// cliRun is a client command running: its options, the API client and
// where it writes.
type cliRun struct {
	m   *Main
	o   *cliOptions
	api *apiclient.ClientWithResponses
	out io.Writer
	in  *bufio.Reader
}

// runCLI runs the parsed client command.
func (m *Main) runCLI(ctx context.Context) error {
	o := m.cli
	c := &cliRun{m: m, o: o, out: m.Stdout}
	if m.Stdin != nil {
		c.in = bufio.NewReader(m.Stdin)
	}
	token := o.token.Reveal()
	api, err := apiclient.NewClientWithResponses(o.server,
		apiclient.WithHTTPClient(problemDoer{next: &http.Client{Timeout: requestTimeout}}),
		apiclient.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("User-Agent", "quarantine-cli/"+Version())
			return nil
		}))
	if err != nil {
		return err
	}
	c.api = api
	if o.verifyRun {
		return c.auditVerify(ctx)
	}
	return o.command.run(c, ctx)
}

// problemDoer sends requests and turns every answer of status 400 or
// more into an error: the *apiclient.Problem of its problem+json body, or
// one made of the status when the body is not one (a proxy's page).
type problemDoer struct{ next apiclient.HttpRequestDoer }

func (d problemDoer) Do(req *http.Request) (*http.Response, error) {
	res, err := d.next.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the server at %s (--server, $%s): %w", req.URL.Host, EnvServer, err)
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	isJSON := strings.HasSuffix(mt, "json")
	if res.StatusCode < 400 && isJSON {
		return res, nil
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode < 400 { // every answer the commands read is JSON
		return nil, fmt.Errorf("%s %s answered %d with %q, not JSON: is %s the quarantine server?",
			req.Method, req.URL.Path, res.StatusCode, mt, req.URL.Host)
	}
	var p apiclient.Problem
	if isJSON && json.Unmarshal(body, &p) == nil && p.Title != "" {
		return nil, &p
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	return nil, &apiclient.Problem{Status: res.StatusCode, Title: http.StatusText(res.StatusCode),
		Detail: fmt.Sprintf("%s %s answered %d: %s", req.Method, req.URL.Path, res.StatusCode, clip(safe(line), 200))}
}

// json tells whether the output is JSON.
func (c *cliRun) json() bool { return c.o.output == "json" }

// printJSON writes an answer's JSON body, indented, as the server sent it
// (members this build does not know included).
func (c *cliRun) printJSON(body []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := c.out.Write(b.Bytes())
	return err
}

// list prints a list's answer: its JSON body as it is, or a table of its
// items, one row each, and then (on stderr) how to get the next page.
func list[T any](c *cliRun, body []byte, items []T, next *string, header []string, row func(T) []string) error {
	if c.json() {
		return c.printJSON(body)
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, row(it))
	}
	if err := c.table(header, rows); err != nil {
		return err
	}
	c.more(next)
	return nil
}

// table writes rows under a header, in columns.
func (c *cliRun) table(header []string, rows [][]string) error {
	w := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// fields writes name: value lines, aligned, leaving out empty values.
func (c *cliRun) fields(kv [][2]string) error { return writeFields(c.out, kv) }

func writeFields(out io.Writer, kv [][2]string) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, f := range kv {
		if f[1] != "" {
			fmt.Fprintf(w, "%s:\t%s\n", f[0], f[1])
		}
	}
	return w.Flush()
}

// more tells how to get the next page, on stderr (stdout stays the page).
func (c *cliRun) more(next *string) {
	if next != nil && *next != "" {
		fmt.Fprintf(c.m.Stderr, "more: add --cursor %s\n", *next)
	}
}

// terminalWidth tells whether w is a terminal and its width.
func (m *Main) terminalWidth(w io.Writer) (int, bool) {
	if m.terminal != nil {
		return m.terminal(w)
	}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		width = 80
	}
	return width, true
}

// safe makes text from the server (reasons, queue names, payloads: all
// untrusted) harmless on a terminal: control characters (escape
// sequences, carriage returns, C1) and bidirectional overrides are shown
// as \x.. or \u.... escapes; newlines and tabs too, so a cell stays on
// its line.
func safe(s string) string {
	return escapeText(s, false)
}

// safeLines is safe keeping newlines (and tabs), for multi-line text.
func safeLines(s string) string {
	return escapeText(s, true)
}

func escapeText(s string, keepLines bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clip shortens s to n runes, marking the cut with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// ago is how long ago t was, shortly: 45s, 12m, 3h, 5d.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return shortDuration(time.Since(t))
}

// shortDuration renders a duration in its largest unit: 45s, 12m, 3h, 5d.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// seconds renders a number of seconds as a duration: 1m30s.
func seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return "-"
	}
	return (time.Duration(math.Ceil(s)) * time.Second).String()
}

// timeAgo renders a time with how long ago it was.
func timeAgo(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339) + " (" + ago(*t) + " ago)"
}
