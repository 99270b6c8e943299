package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// usages holds each command's synopsis, printed by -h above its flags.
var usages = map[string]string{
	cmdServe: `Usage: quarantine [serve] [flags]

Runs the service: the REST API under /api/v1, /healthz, /readyz and
/metrics. On the embedded SQLite default it migrates the database by
itself; on PostgreSQL pass --migrate (or run 'quarantine migrate' first).
When the database holds no active token, an admin token is created and its
login URL printed once on stderr.`,
	cmdMigrate: `Usage: quarantine migrate [--runtime-role ROLE] [flags]

Applies the database migrations this build carries and prints the schema
version. Run it as the role that owns the tables. With a runtime role
(--runtime-role, $QUARANTINE_DATABASE_RUNTIME_ROLE or
database_runtime_role), it then grants that existing PostgreSQL role
exactly what serve needs: serve runs as it, and may append to the audit
log but never change, delete or truncate it.`,
	cmdTokenCreate: `Usage: quarantine token create --name NAME --role ROLE [--owner TEAM]...

Creates an API token and prints its secret, alone on one line, on stdout.
The secret is not stored and cannot be shown again. A token with owners
sees and acts on only those teams' messages.`,
	cmdAuditVerify: `Usage: quarantine audit verify [--head-seq N --head-hash HASH] [flags]
       quarantine audit verify --server URL [--head-seq N --head-hash HASH] [--output json]

Walks the audit log's hash chain and prints the verification as JSON. A
head reported earlier (--head-seq and --head-hash) must still be on the
chain. Exits with status 1 when the chain does not verify. With --server,
asks that running server to walk it instead of opening the database (the
token from --token, $QUARANTINE_TOKEN or the CLI config file; see
docs/cli.md).`,
	cmdDemo: `Usage: quarantine demo [--tour] [flags]

Runs the whole loop in one process on the embedded store
(sqlite:./quarantine-data/demo.db unless --database or
QUARANTINE_DATABASE_URL says otherwise): an in-memory work queue, a worker
with durable claims, a producer of build-report jobs (good, poison and
flaky ones), and the service collecting the worker's failures and
replaying them. It prints its login URL like serve. With --tour it walks
the loop by itself on a fresh temporary database, prints each step and
what it proves, and exits (0 when every step held).`,
	cmdVersion: `Usage: quarantine version

Prints the version.`,
}

const topUsage = `quarantine: a dead-letter quarantine and audited replay service.

Usage:
  quarantine [serve] [flags]          run the service (the default command)
  quarantine demo [--tour]            the whole loop in one process (--tour: by itself, then exit)
  quarantine migrate [flags]          apply the database migrations
  quarantine token create --name NAME --role viewer|operator|admin [--owner TEAM]...
                                      create an API token; prints its secret
  quarantine audit verify [--head-seq N --head-hash HASH]
                                      verify the audit log's hash chain
  quarantine version                  print the version

Client commands, talking to a running server (--server, --token; see docs/cli.md):
  quarantine messages list|show|edit|discard
  quarantine groups list
  quarantine alarms list
  quarantine replay create|start|pause|resume|cancel|watch|list|show
  quarantine audit verify --server URL

Run 'quarantine COMMAND -h' for a command's flags.

Environment (flags override it; it overrides the config file):
  QUARANTINE_CONFIG        YAML config file (see quarantine.example.yaml)
  QUARANTINE_DATABASE_URL  sqlite:PATH or postgres://… (default sqlite:./quarantine-data/quarantine.db)
  QUARANTINE_LISTEN        host:port to serve on (default 127.0.0.1:8080)
  QUARANTINE_TLS_CERT_FILE, QUARANTINE_TLS_KEY_FILE
                           serve HTTPS with this certificate and key (PEM files)
  QUARANTINE_DATABASE_RUNTIME_ROLE
                           the PostgreSQL role serve runs as, granted by migrate
  QUARANTINE_SERVER, QUARANTINE_TOKEN
                           the client commands' server URL and API token
                           (then ~/.config/quarantine/cli.yaml)
`

var reHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseFlags reads the command line (without the program name) and
// resolves the configuration. It returns flag.ErrHelp after printing the
// usage for -h, a *UsageError for a bad command line, and the
// configuration's EINVALID error naming the key for a bad configuration.
func (m *Main) ParseFlags(_ context.Context, args []string) error {
	name, rest, err := splitCommand(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(m.Stderr, topUsage)
		return err
	}
	if err != nil {
		return err
	}
	m.command = name
	if cmd, ok := cliCommandNamed(name); ok {
		return m.parseCLI(cmd, rest)
	}

	fs := flag.NewFlagSet("quarantine "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		configPath string
		o          Overrides
		owners     stringList
	)
	if name != cmdVersion {
		fs.StringVar(&configPath, "config", "", "YAML config `file` (default $"+EnvConfig+")")
		fs.StringVar(&o.Database, "database", "", "database `URL`: sqlite:PATH or postgres://… (default $"+EnvDatabase+", then the file, then "+"sqlite:./quarantine-data/quarantine.db)")
	}
	switch name {
	case cmdServe:
		fs.StringVar(&o.Listen, "listen", "", "`host:port` to serve on (default $"+EnvListen+", then the file, then "+DefaultListen+")")
		fs.BoolVar(&m.migrate, "migrate", false, "apply pending migrations first (always done on the embedded SQLite default)")
		fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serve HTTPS with this PEM certificate `file` (default $"+EnvTLSCertFile+", then tls.cert_file)")
		fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "the PEM private key `file` of --tls-cert-file (default $"+EnvTLSKeyFile+", then tls.key_file)")
	case cmdMigrate:
		fs.StringVar(&o.RuntimeRole, "runtime-role", "", "PostgreSQL `role` serve runs as, granted what it needs (default $"+EnvRuntimeRole+", then database_runtime_role)")
	case cmdDemo:
		fs.StringVar(&o.Listen, "listen", "", "`host:port` to serve on (default $"+EnvListen+", then the file, then "+DefaultListen+")")
		fs.BoolVar(&m.demo.tour, "tour", false, "walk the loop by itself on a fresh database, print each step, and exit")
	case cmdTokenCreate:
		fs.StringVar(&m.token.name, "name", "", "the token's `name`, unique among active tokens (required)")
		fs.StringVar(&m.token.role, "role", "", "`role`: viewer, operator or admin (required)")
		fs.Var(&owners, "owner", "restrict the token to this `team`'s messages (repeatable)")
	case cmdAuditVerify:
		fs.Int64Var(&m.verify.headSeq, "head-seq", 0, "sequence `number` of a head reported earlier (with --head-hash)")
		fs.StringVar(&m.verify.headHash, "head-hash", "", "`hash` of that head, 64 hex digits (with --head-seq)")
		m.remoteVerifyFlags(fs)
	}

	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			m.printUsage(name, fs)
			return err
		}
		return &UsageError{Command: name, Problem: err.Error()}
	}
	if fs.NArg() > 0 {
		return &UsageError{Command: name, Problem: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	m.token.owners = owners
	if err := m.checkFlags(name, fs); err != nil {
		return err
	}
	if name == cmdVersion {
		return nil
	}
	if name == cmdAuditVerify {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := m.checkRemoteVerify(set); err != nil || m.cli != nil {
			return err
		}
	}
	if name == cmdDemo && o.Database == "" && m.Getenv(EnvDatabase) == "" {
		o.Database = demoDatabase
	}
	c, err := ResolveConfig(configPath, m.Getenv, o)
	if err != nil {
		return err
	}
	m.Config = c
	return nil
}

// checkFlags checks what the flag package cannot: required flags, pairs,
// and the form of values.
func (m *Main) checkFlags(name string, fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch name {
	case cmdTokenCreate:
		if strings.TrimSpace(m.token.name) == "" {
			return &UsageError{Command: name, Problem: "--name is required"}
		}
		if m.token.role == "" {
			return &UsageError{Command: name, Problem: "--role is required (viewer, operator or admin)"}
		}
		if _, err := quarantine.ParseRole(m.token.role); err != nil {
			return &UsageError{Command: name, Problem: "--role: " + quarantine.ErrorMessage(err)}
		}
	case cmdAuditVerify:
		if set["head-seq"] != set["head-hash"] {
			return &UsageError{Command: name, Problem: "--head-seq and --head-hash go together"}
		}
		if set["head-seq"] && m.verify.headSeq < 1 {
			return &UsageError{Command: name, Problem: "--head-seq must be at least 1"}
		}
		if set["head-hash"] && !reHash.MatchString(m.verify.headHash) {
			return &UsageError{Command: name, Problem: "--head-hash must be 64 lowercase hex digits"}
		}
	}
	return nil
}

// splitCommand finds the command at the start of args and returns it with
// the arguments left for its flags. Flags alone mean serve.
func splitCommand(args []string) (name string, rest []string, err error) {
	if len(args) == 0 {
		return cmdServe, nil, nil
	}
	first := args[0]
	switch first {
	case "-h", "-help", "--help", "help":
		return "", nil, flag.ErrHelp
	case cmdServe, cmdMigrate, cmdVersion, cmdDemo:
		return first, args[1:], nil
	}
	if subs := subcommands(first); subs != nil {
		if len(args) < 2 {
			return "", nil, &UsageError{Problem: fmt.Sprintf("'%s' needs a subcommand: %s", first, strings.Join(subs, ", "))}
		}
		if !slices.Contains(subs, args[1]) {
			which := "the one there is: "
			if len(subs) > 1 {
				which = "one of: "
			}
			return "", nil, &UsageError{Problem: fmt.Sprintf("unknown %s subcommand %q (%s%s)", first, args[1], which, strings.Join(subs, ", "))}
		}
		return first + " " + args[1], args[2:], nil
	}
	if strings.HasPrefix(first, "-") {
		return cmdServe, args, nil
	}
	return "", nil, &UsageError{Problem: fmt.Sprintf("unknown command %q", first)}
}

func (m *Main) printUsage(name string, fs *flag.FlagSet) {
	text, ok := usages[name]
	if cmd, isCLI := cliCommandNamed(name); !ok && isCLI {
		text = cmd.usage
	}
	fmt.Fprintln(m.Stderr, text)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(m.Stderr, "\nFlags:")
		fs.SetOutput(m.Stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
