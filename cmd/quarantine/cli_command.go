package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// The client commands talk to a running server through its REST API (the
// public client package), where the other commands open the database.
const (
	cmdMessagesList    = "messages list"
	cmdMessagesShow    = "messages show"
	cmdMessagesEdit    = "messages edit"
	cmdMessagesDiscard = "messages discard"
	cmdGroupsList      = "groups list"
	cmdAlarmsList      = "alarms list"
	cmdReplayCreate    = "replay create"
	cmdReplayStart     = "replay start"
	cmdReplayPause     = "replay pause"
	cmdReplayResume    = "replay resume"
	cmdReplayCancel    = "replay cancel"
	cmdReplayWatch     = "replay watch"
	cmdReplayList      = "replay list"
	cmdReplayShow      = "replay show"
)

// Environment of the client commands.
const (
	EnvServer    = "QUARANTINE_SERVER"
	EnvToken     = "QUARANTINE_TOKEN"
	EnvCLIConfig = "QUARANTINE_CLI_CONFIG"
)

// defaultServer is where the client commands look without --server,
// $QUARANTINE_SERVER or a server in the CLI config file: serve's default.
const defaultServer = "http://" + DefaultListen

// cliCommand is one client command: its positional arguments, its own
// flags (beside --server, --token, --cli-config and --output) and what it
// does.
type cliCommand struct {
	name     string
	args     string // the positional arguments as the synopsis shows them
	min, max int    // how many positional arguments; max -1: no limit
	flags    func(fs *flag.FlagSet, o *cliOptions)
	run      func(c *cliRun, ctx context.Context) error
	usage    string
}

// cliCommands lists the client commands in the order the help shows them.
// (A function, not a variable: the run functions refer back to it.)
func cliCommands() []cliCommand {
	return []cliCommand{
		{name: cmdMessagesList, flags: listFlags, run: (*cliRun).messagesList, usage: usageMessagesList},
		{name: cmdMessagesShow, args: "ID", min: 1, max: 1, flags: showFlags, run: (*cliRun).messagesShow, usage: usageMessagesShow},
		{name: cmdMessagesEdit, args: "ID", min: 1, max: 1, flags: editFlags, run: (*cliRun).messagesEdit, usage: usageMessagesEdit},
		{name: cmdMessagesDiscard, args: "ID...", min: 1, max: -1, flags: reasonFlag, run: (*cliRun).messagesDiscard, usage: usageMessagesDiscard},
		{name: cmdGroupsList, flags: groupsFlags, run: (*cliRun).groupsList, usage: usageGroupsList},
		{name: cmdAlarmsList, run: (*cliRun).alarmsList, usage: usageAlarmsList},
		{name: cmdReplayCreate, args: "[ID...]", max: -1, flags: createFlags, run: (*cliRun).replayCreate, usage: usageReplayCreate},
		{name: cmdReplayStart, args: "ID", min: 1, max: 1, flags: startFlags, run: (*cliRun).replayStart, usage: usageReplayStart},
		{name: cmdReplayPause, args: "ID", min: 1, max: 1, flags: reasonFlag, run: (*cliRun).replayChange, usage: usageReplayChange("pause", "Pauses a running batch; the items it leased still hold their messages.")},
		{name: cmdReplayResume, args: "ID", min: 1, max: 1, flags: watchableReason, run: (*cliRun).replayChange, usage: usageReplayChange("resume", "Resumes a paused or halted batch (resuming a halted one overrides its failed canary).")},
		{name: cmdReplayCancel, args: "ID", min: 1, max: 1, flags: reasonFlag, run: (*cliRun).replayChange, usage: usageReplayChange("cancel", "Cancels a batch; the messages of its pending items are quarantined again.")},
		{name: cmdReplayWatch, args: "ID", min: 1, max: 1, flags: intervalFlag, run: (*cliRun).replayWatch, usage: usageReplayWatch},
		{name: cmdReplayList, flags: replayListFlags, run: (*cliRun).replayList, usage: usageReplayList},
		{name: cmdReplayShow, args: "ID", min: 1, max: 1, run: (*cliRun).replayShow, usage: usageReplayShow},
	}
}

// cliCommandNamed returns the client command of that name.
func cliCommandNamed(name string) (cliCommand, bool) {
	for _, c := range cliCommands() {
		if c.name == name {
			return c, true
		}
	}
	return cliCommand{}, false
}

// subcommands returns the subcommands of a command group (token, audit,
// messages, replay…) in help order, or nil when group is not one.
func subcommands(group string) []string {
	var subs []string
	names := []string{cmdTokenCreate, cmdAuditVerify}
	for _, c := range cliCommands() {
		names = append(names, c.name)
	}
	for _, n := range names {
		if g, sub, ok := strings.Cut(n, " "); ok && g == group {
			subs = append(subs, sub)
		}
	}
	return subs
}

// cliOptions is a client command's parsed command line.
type cliOptions struct {
	command cliCommand
	server  string // the base URL, resolved
	token   Secret // resolved
	output  string // table or json
	args    []string
	set     map[string]bool // the flags given

	// Given on the command line, before resolution.
	flagServer, flagToken, configFile string

	filter      filterFlags
	limit       int
	cursor      string
	reason      string
	payload     string // messages edit --payload-file
	payloadOnly bool   // messages show --payload
	ctype       string
	ifMatch     string
	replay      replayFlags
	yes         bool
	watch       bool
	interval    time.Duration
	states      csvList
	queue       string
	actor       string
	verifyRun   bool // audit verify --server
}

// connectionFlags registers the flags every client command has.
func connectionFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.StringVar(&o.flagServer, "server", "", "the server's base `URL` (default $"+EnvServer+", then server: in the CLI config file, then "+defaultServer+")")
	fs.StringVar(&o.flagToken, "token", "", "API token `secret` (default $"+EnvToken+", then token: in the CLI config file)")
	fs.StringVar(&o.configFile, "cli-config", "", "CLI config `file` with server: and token: (default $"+EnvCLIConfig+", then ~/.config/quarantine/cli.yaml)")
	fs.StringVar(&o.output, "output", "table", "`format`: table or json")
}

func reasonFlag(fs *flag.FlagSet, o *cliOptions) {
	fs.StringVar(&o.reason, "reason", "", "why, recorded in the audit log (required)")
}

func intervalFlag(fs *flag.FlagSet, o *cliOptions) {
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "how often to ask the server for the batch's progress")
}

func watchableReason(fs *flag.FlagSet, o *cliOptions) {
	reasonFlag(fs, o)
	fs.BoolVar(&o.watch, "watch", false, "then follow the batch like replay watch")
	intervalFlag(fs, o)
}

func pageFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.IntVar(&o.limit, "limit", 50, "page size, 1 to 1000")
	fs.StringVar(&o.cursor, "cursor", "", "the next page: the `cursor` printed under the previous one")
}

func listFlags(fs *flag.FlagSet, o *cliOptions) {
	o.filter.register(fs)
	pageFlags(fs, o)
}

func groupsFlags(fs *flag.FlagSet, o *cliOptions) {
	o.filter.register(fs)
	fs.IntVar(&o.limit, "limit", 50, "at most this many groups, 1 to 1000")
}

func showFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.BoolVar(&o.payloadOnly, "payload", false, "print only the payload's bytes, exactly as stored (to edit them)")
}

func editFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.StringVar(&o.payload, "payload-file", "", "the new payload: a `file`, or - for stdin (required)")
	fs.StringVar(&o.ctype, "content-type", "", "the new payload's content `type` (default: unchanged)")
	fs.StringVar(&o.ifMatch, "if-match", "", "the payload_sha256 the edit is based on (default: the current one); another is refused")
	reasonFlag(fs, o)
}

func startFlags(fs *flag.FlagSet, o *cliOptions) {
	watchableReason(fs, o)
	fs.BoolVar(&o.replay.force, "force", false, "override the incident guard (audited)")
	fs.BoolVar(&o.replay.acceptKeyRuleChange, "accept-key-rule-change", false, "start even when a queue's key rule changed since collection (audited)")
}

func replayListFlags(fs *flag.FlagSet, o *cliOptions) {
	fs.Var(&o.states, "state", "batches in this `state` (repeatable, or comma-separated)")
	fs.StringVar(&o.queue, "queue", "", "batches holding messages of this `queue`")
	fs.StringVar(&o.actor, "actor", "", "batches created by this `actor` (token:NAME)")
	pageFlags(fs, o)
}

// parseCLI parses a client command's command line and resolves the
// server and the token. It returns flag.ErrHelp after printing the usage
// for -h and a *UsageError for a bad command line.
func (m *Main) parseCLI(cmd cliCommand, args []string) error {
	o := &cliOptions{command: cmd, set: map[string]bool{}}
	fs := flag.NewFlagSet("quarantine "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	connectionFlags(fs, o)
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	args, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			m.printUsage(cmd.name, fs)
			return err
		}
		return &UsageError{Command: cmd.name, Problem: err.Error()}
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	o.args = args
	switch {
	case len(args) < cmd.min:
		return &UsageError{Command: cmd.name, Problem: fmt.Sprintf("missing %s", cmd.args)}
	case cmd.max >= 0 && len(args) > cmd.max:
		return &UsageError{Command: cmd.name, Problem: fmt.Sprintf("unexpected argument %q", args[cmd.max])}
	}
	if err := o.check(); err != nil {
		return err
	}
	if err := o.resolve(m.Getenv); err != nil {
		return err
	}
	m.cli = o
	return nil
}

// parseInterspersed parses fs from args, allowing positional arguments
// between flags (quarantine replay pause ID --reason …); after "--" every
// argument is positional. It returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// check checks what the flag package cannot.
func (o *cliOptions) check() error {
	name := o.command.name
	bad := func(format string, a ...any) error {
		return &UsageError{Command: name, Problem: fmt.Sprintf(format, a...)}
	}
	if o.output != "table" && o.output != "json" {
		return bad("--output must be table or json, not %q", o.output)
	}
	if o.set["limit"] && (o.limit < 1 || o.limit > 1000) {
		return bad("--limit must be 1 to 1000")
	}
	if o.set["interval"] && o.interval < 10*time.Millisecond {
		return bad("--interval must be at least 10ms")
	}
	needsReason := name == cmdMessagesEdit || name == cmdMessagesDiscard || name == cmdReplayCreate ||
		name == cmdReplayStart || name == cmdReplayPause || name == cmdReplayResume || name == cmdReplayCancel
	if needsReason && strings.TrimSpace(o.reason) == "" {
		return bad("--reason is required: it is recorded in the audit log")
	}
	if name == cmdMessagesEdit && o.payload == "" {
		return bad("--payload-file is required (a file, or - for stdin)")
	}
	if o.ifMatch != "" && !reHash.MatchString(o.ifMatch) {
		return bad("--if-match must be a payload_sha256: 64 lowercase hex digits")
	}
	if name == cmdReplayCreate {
		return o.replay.check(name, len(o.args) > 0, o.filter.given())
	}
	return nil
}

// cliFile is the CLI config file (~/.config/quarantine/cli.yaml).
type cliFile struct {
	Server string `yaml:"server"`
	Token  Secret `yaml:"token"`
}

// resolve settles the server and the token: the flag, else the
// environment, else the CLI config file; the server defaults to serve's
// default address.
func (o *cliOptions) resolve(getenv func(string) string) error {
	name := o.command.name
	o.server, o.token = o.flagServer, Secret(o.flagToken)
	if o.server == "" {
		o.server = getenv(EnvServer)
	}
	if o.token == "" {
		o.token = Secret(getenv(EnvToken))
	}
	path, explicit := o.configFile, o.configFile != ""
	if !explicit {
		path, explicit = getenv(EnvCLIConfig), getenv(EnvCLIConfig) != ""
	}
	if !explicit {
		path = defaultCLIConfig(getenv)
	}
	if explicit || (o.server == "" || o.token == "") && path != "" {
		f, err := readCLIFile(path, explicit)
		if err != nil {
			return err
		}
		if o.server == "" {
			o.server = f.Server
		}
		if o.token == "" {
			o.token = f.Token
		}
	}
	if o.server == "" {
		o.server = defaultServer
	}
	server, err := normalizeServer(o.server)
	if err != nil {
		return &UsageError{Command: name, Problem: err.Error()}
	}
	o.server = server
	if o.token == "" {
		where := "~/.config/quarantine/cli.yaml"
		if path != "" {
			where = path
		}
		return &UsageError{Command: name, Problem: "no API token: pass --token, set " + EnvToken + ", or put token: in " + where}
	}
	return nil
}

// defaultCLIConfig is $XDG_CONFIG_HOME/quarantine/cli.yaml, else
// $HOME/.config/quarantine/cli.yaml; "" without either.
func defaultCLIConfig(getenv func(string) string) string {
	if dir := getenv("XDG_CONFIG_HOME"); dir != "" {
		return filepath.Join(dir, "quarantine", "cli.yaml")
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "quarantine", "cli.yaml")
	}
	return ""
}

// readCLIFile reads the CLI config file. A missing file is no error
// unless it was named (--cli-config, $QUARANTINE_CLI_CONFIG); an unknown
// key is.
func readCLIFile(path string, named bool) (cliFile, error) {
	var f cliFile
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !named {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("the CLI config file: %w", err)
	}
	if err := yaml.UnmarshalWithOptions(data, &f, yaml.Strict()); err != nil {
		return f, fmt.Errorf("the CLI config file %s (keys: server, token): %s", path, yaml.FormatError(err, false, false))
	}
	return f, nil
}

// normalizeServer turns host:port or a URL into a base URL without a
// trailing slash: http:// when no scheme is given.
func normalizeServer(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--server %q is not a server URL like http://127.0.0.1:8080 or https://quarantine.example.com", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
