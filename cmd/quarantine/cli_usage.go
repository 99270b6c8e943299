package main

// The synopses of the client commands, printed by -h above their flags.

// cliConnection ends every client command's synopsis.
const cliConnection = `

It talks to a running server: --server, else $QUARANTINE_SERVER, else
server: in the CLI config file, else http://127.0.0.1:8080; the token from
--token, else $QUARANTINE_TOKEN, else token: in the CLI config file
(--cli-config, $QUARANTINE_CLI_CONFIG, or ~/.config/quarantine/cli.yaml).
Errors print the server's problem (title, detail, field) and exit 1; a bad
command line exits 2.`

const usageMessagesList = `Usage: quarantine messages list [filters] [--limit N] [--cursor C] [--output json]

Lists messages, newest failure first, one page at a time (the next
page's --cursor is printed on stderr). The filters are the query
parameters of GET /api/v1/messages: repeat a flag for alternatives.` + cliConnection

const usageMessagesShow = `Usage: quarantine messages show ID [--payload] [--output json]

Shows one message: where and why it failed, its key and its payload
(JSON indented). With --payload, only the payload's bytes as stored, to
edit them and give them back to messages edit.` + cliConnection

const usageMessagesEdit = `Usage: quarantine messages edit ID --payload-file FILE|- --reason WHY [--content-type T] [--if-match SHA256]

Replaces the payload with a new version (audited with the reason). JSON
for a JSON message is stored as written, other content byte-exact. The
edit is based on the payload_sha256 given by --if-match (as messages show
prints it) or else on the current one: a concurrent edit in between is
refused (412).` + cliConnection

const usageMessagesDiscard = `Usage: quarantine messages discard ID... --reason WHY

Discards messages (kept, not deleted; audited). One that cannot be
discarded is refused (one ID: the error) or listed as skipped (several).` + cliConnection

const usageGroupsList = `Usage: quarantine groups list [filters] [--limit N] [--output json]

Lists the failure groups of the filtered messages, largest first: the
messages sharing a fingerprint (job, failure class and normalised
reason). Give a group's --fingerprint to messages list or replay create.` + cliConnection

const usageAlarmsList = `Usage: quarantine alarms list [--output json]

Lists the age alarms' states, per alarm and queue.` + cliConnection

const usageReplayCreate = `Usage: quarantine replay create [ID... | filters] --reason WHY [--yes] [--watch] [flags]

Replays messages, given by IDs or by the filters of messages list. First a
dry run: the server pins the messages in a draft and the command shows how
many would be published, skipped (and why) and undeliverable. Then it asks
to type that count (unless --yes: for scripts); anything else cancels the
draft. Then it starts the batch, and with --watch follows it like replay
watch. --dry-run stops after the preview and leaves the draft for replay
start.` + cliConnection

const usageReplayStart = `Usage: quarantine replay start ID --reason WHY [--watch] [--force] [--accept-key-rule-change]

Starts a draft made by replay create --dry-run (or the API).` + cliConnection

func usageReplayChange(verb, what string) string {
	return "Usage: quarantine replay " + verb + " ID --reason WHY\n\n" + what + cliConnection
}

const usageReplayWatch = `Usage: quarantine replay watch ID [--interval D] [--output json]

Follows a batch until it ends. On a terminal: one line redrawn in place,
with a progress bar, the achieved rate, the ETA and the failures. When
stdout is not a terminal: a plain line at each change; with --output
json, the batch as one JSON line at each change. Exits 0 when the batch
completed, 1 when it failed, was cancelled or expired. A paused or halted
batch is waited on; interrupting the command leaves the batch running.` + cliConnection

const usageReplayList = `Usage: quarantine replay list [--state S] [--queue Q] [--actor A] [--limit N] [--cursor C]

Lists replay batches, newest first.` + cliConnection

const usageReplayShow = `Usage: quarantine replay show ID [--output json]

Shows one replay batch: its state, progress, outcomes and canary.` + cliConnection
