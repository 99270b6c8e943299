package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/api"
	"github.com/quarantine-dev/quarantine/store"
)

// Commands, as named on the command line.
const (
	cmdServe       = "serve"
	cmdMigrate     = "migrate"
	cmdTokenCreate = "token create"
	cmdAuditVerify = "audit verify"
	cmdVersion     = "version"
	cmdDemo        = "demo"
)

// Main is the program: ParseFlags reads a command line, Run executes it
// (for serve: starts listening and returns), Wait blocks while serving,
// Close shuts everything down. Tests drive it directly.
type Main struct {
	// Stdout receives a command's result (a token secret, a verification);
	// Stderr receives logs, usage and the first-start admin token.
	Stdout, Stderr io.Writer
	// Stdin gives replay create its confirmation and messages edit its
	// payload (--payload-file -); nil reads as empty.
	Stdin io.Reader
	// Getenv reads the environment; os.Getenv by default.
	Getenv func(string) string

	// Config is the resolved configuration, set by ParseFlags.
	Config Config

	command string
	migrate bool // serve --migrate
	token   tokenOptions
	verify  verifyOptions
	demo    demoOptions
	cli     *cliOptions // a client command (messages, replay…, audit verify --server)
	// terminal overrides terminalWidth (tests draw replay watch's bar).
	terminal func(io.Writer) (width int, ok bool)

	logger *slog.Logger // the base logger, handed to the API
	log    *slog.Logger // this package's, with component=main
	store  store.Store
	ln     net.Listener
	server *http.Server
	api    *api.Server   // the REST API, closed after server
	certs  *certReloader // the TLS key pair when serving HTTPS; nil otherwise
	// certCheckEvery overrides certCheckEvery (tests look at every
	// handshake).
	certCheckEvery time.Duration
	served         chan error // the HTTP server's exit, when serving

	collectors *runningCollectors
	replays    *runningReplays
	alarms     *runningAlarms
	demoRun    *demo      // the demo's broker and worker; nil otherwise
	retention  *retention // the payload purge of serve; nil otherwise

	closeOnce sync.Once
	closeErr  error
}

type tokenOptions struct {
	name   string
	role   string
	owners []string
}

type verifyOptions struct {
	headSeq  int64
	headHash string
}

// NewMain returns a Main writing to os.Stdout and os.Stderr and reading
// os.Stdin and the process environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Getenv: os.Getenv}
}

// UsageError is a bad command line: an unknown command or flag, a missing
// or malformed argument. The program exits with status 2.
type UsageError struct {
	Command string // the command whose usage was violated, "" for the top level
	Problem string
}

func (e *UsageError) Error() string {
	help := "quarantine -h"
	if e.Command != "" {
		help = "quarantine " + e.Command + " -h"
	}
	return fmt.Sprintf("%s (see '%s')", e.Problem, help)
}

// errChainBroken is returned by Run for audit verify when the chain does
// not verify; the verification itself is already on Stdout.
var errChainBroken = errors.New("the audit chain does not verify")

// Execute runs one command line through m and returns the exit status:
// 0 on success, 1 on a failure, 2 on a usage error. -h prints the usage
// and gives 0.
func Execute(ctx context.Context, m *Main, args []string) int {
	if err := m.ParseFlags(ctx, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(m.Stderr, "quarantine:", describe(err))
		var u *UsageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	err := m.Run(ctx)
	if err == nil {
		err = m.Wait(ctx)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errChainBroken):
		fmt.Fprintln(m.Stderr, "quarantine:", err)
	default:
		fmt.Fprintln(m.Stderr, "quarantine:", describe(err))
	}
	return 1
}

// describe renders err for a terminal: the user-safe message, then the
// cause, which an operator needs to see (unlike an API client).
func describe(err error) string {
	var e *quarantine.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	s := e.Message
	if e.Field != "" && !strings.Contains(s, e.Field) {
		s = e.Field + ": " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
