// Command quarantine runs the dead-letter quarantine service and its
// maintenance commands.
//
//	quarantine [serve] [--config FILE] [--database URL] [--listen ADDR] [--migrate]
//	quarantine migrate [--config FILE] [--database URL]
//	quarantine token create --name NAME --role ROLE [--owner TEAM]...
//	quarantine audit verify [--head-seq N --head-hash H]
//	quarantine version
//
// The configuration is resolved by LoadConfig: defaults, then the YAML file
// (--config or QUARANTINE_CONFIG), then QUARANTINE_DATABASE_URL and
// QUARANTINE_LISTEN, then the flags. Main holds the wiring so that tests
// boot the real service on 127.0.0.1:0; main only builds a signal context
// and calls it.
//
// Exit status: 0 on success, 1 on a failure (or a broken audit chain), 2 on
// a command-line usage error.
package main
