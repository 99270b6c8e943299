// Package publisher holds what the broker packages' replay publishers
// share.
package publisher

import (
	"log/slog"
	"strings"

	"github.com/quarantine-dev/quarantine/replay"
)

// Log is the logger of the replay publisher name of a broker kind
// ("kafka"): logger, or one that discards for nil, with the component
// "KIND publisher" and the publisher's name.
func Log(logger *slog.Logger, kind, name string) *slog.Logger {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return logger.With("component", kind+" publisher", "publisher", name)
}

// Headers are the names of the headers of o that a broker sends as
// headers: all but those skip takes (the broker's own, such as a record
// key, and its bookkeeping). hasContentType says whether one of them
// gives the content type: content-type in any case, or contentType.
func Headers(o *replay.Outgoing, skip func(name, value string) bool) (names []string, hasContentType bool) {
	names = make([]string, 0, len(o.Headers))
	for k, v := range o.Headers {
		if skip(k, v) {
			continue
		}
		if strings.EqualFold(k, "content-type") || k == "contentType" {
			hasContentType = true
		}
		names = append(names, k)
	}
	return names, hasContentType
}
