package pubsub

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	ps "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quarantine-dev/quarantine"
)

// Config is the broker part of one `collectors:` entry of kind pubsub.
//
// The collector drains Subscription, a subscription on a dead-letter
// topic, acknowledging each message only once the store committed it.
// Replays are published to the topic of the dead letter's source
// subscription in Project (or the topic the queue names).
type Config struct {
	// Project is the Google Cloud project of the subscription and, by
	// default, of the replay topics.
	Project string `yaml:"project"`
	// Subscription is the subscription on the dead-letter topic that the
	// collector drains: its ID, or projects/P/subscriptions/S.
	Subscription string `yaml:"subscription"`
	// SourceTopic is the queue of a message that names no source (one
	// published to the dead-letter topic by hand, or by an emulator that
	// does not stamp the CloudPubSubDeadLetterSource* attributes), and of
	// one whose source subscription's topic cannot be looked up. Without
	// it such a message is stored without a queue.
	SourceTopic string `yaml:"source_topic,omitempty"`
	// Endpoint is an emulator's host:port (plaintext, no credentials),
	// like the PUBSUB_EMULATOR_HOST of Google's clients. Empty for the
	// real service.
	Endpoint string `yaml:"endpoint,omitempty"`
	// CredentialsFile is a service account key file (JSON). Empty: the
	// application default credentials (GOOGLE_APPLICATION_CREDENTIALS,
	// the metadata server, gcloud's user credentials).
	CredentialsFile string `yaml:"credentials_file,omitempty"`
	// MaxOutstanding is how many messages the subscriber holds unacked at
	// most (default: what the collector holds, (commits+1) × batch_size).
	MaxOutstanding int `yaml:"max_outstanding,omitempty"`
	// Streams is the number of streaming pulls (default 1, at most 16).
	Streams int `yaml:"streams,omitempty"`
}

var (
	projectRE = regexp.MustCompile(`^[a-z][a-z0-9.:-]{4,99}[a-z0-9]$|^[a-z][a-z0-9-]{0,30}$`)
	// resourceRE is a topic or subscription ID: 3..255 characters,
	// starting with a letter, not with "goog".
	resourceRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)
)

// Validate checks c. Errors are EINVALID *quarantine.Error values whose
// Field is the YAML key at fault.
func (c *Config) Validate() error {
	if c.Project == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "project", "project is required: the Google Cloud project ID")
	}
	if !projectRE.MatchString(c.Project) {
		return quarantine.FieldErrorf(quarantine.EINVALID, "project", "%q is not a project ID", quarantine.Clip(c.Project))
	}
	if c.Subscription == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "subscription", "subscription is required: the subscription on the dead-letter topic")
	}
	if _, _, err := split(c.Subscription, "subscriptions"); err != nil {
		return quarantine.FieldErrorf(quarantine.EINVALID, "subscription", "%s", err)
	}
	if c.SourceTopic != "" {
		if _, _, err := split(c.SourceTopic, "topics"); err != nil {
			return quarantine.FieldErrorf(quarantine.EINVALID, "source_topic", "%s", err)
		}
	}
	if c.Endpoint != "" {
		if strings.Contains(c.Endpoint, "://") || !strings.Contains(c.Endpoint, ":") {
			return quarantine.FieldErrorf(quarantine.EINVALID, "endpoint", "%q is not host:port, like 127.0.0.1:8085", quarantine.Clip(c.Endpoint))
		}
		if c.CredentialsFile != "" {
			return quarantine.FieldErrorf(quarantine.EINVALID, "credentials_file", "an emulator endpoint takes no credentials")
		}
	}
	if c.MaxOutstanding < 0 || c.MaxOutstanding > 1_000_000 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "max_outstanding", "max_outstanding must be between 0 (default) and 1000000")
	}
	if c.Streams < 0 || c.Streams > 16 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "streams", "streams must be between 0 (default 1) and 16")
	}
	return nil
}

// split reads name, an ID or projects/P/<kind>/ID, into its project ("" for
// a bare ID) and ID.
func split(name, kind string) (project, id string, err error) {
	id = name
	if strings.HasPrefix(name, "projects/") {
		parts := strings.Split(name, "/")
		if len(parts) != 4 || parts[2] != kind || !projectRE.MatchString(parts[1]) {
			return "", "", fmt.Errorf("%q is neither an ID nor projects/PROJECT/%s/ID", quarantine.Clip(name), kind)
		}
		project, id = parts[1], parts[3]
	}
	if !resourceRE.MatchString(id) || strings.HasPrefix(id, "goog") {
		return "", "", fmt.Errorf("%q is not a valid ID (3 to 255 letters, digits and -._~+%%, starting with a letter, not goog)", quarantine.Clip(id))
	}
	return project, id, nil
}

// fullName is name as projects/P/<kind>/ID, P defaulting to project.
func fullName(project, kind, name string) string {
	if strings.HasPrefix(name, "projects/") {
		return name
	}
	return "projects/" + project + "/" + kind + "/" + name
}

// LogValue shows c.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("project", c.Project),
		slog.String("subscription", c.Subscription),
		slog.String("endpoint", c.Endpoint),
		slog.Bool("credentials_file", c.CredentialsFile != ""),
	)
}

// clientOpts are the options of every client of c: the emulator's
// endpoint without authentication, or a credentials file.
func (c Config) clientOpts() ([]option.ClientOption, error) {
	switch {
	case c.Endpoint != "":
		return []option.ClientOption{
			option.WithEndpoint(c.Endpoint),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
			option.WithTelemetryDisabled(),
		}, nil
	case c.CredentialsFile != "":
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			return nil, &quarantine.Error{Code: quarantine.EINVALID, Field: "credentials_file", Err: err, Message: "pubsub: cannot read the credentials file"}
		}
		return []option.ClientOption{option.WithAuthCredentialsFile(option.ServiceAccount, c.CredentialsFile)}, nil
	}
	return nil, nil
}

// newClient makes a client of c's project. It does not dial.
func (c Config) newClient(extra ...option.ClientOption) (*ps.Client, error) {
	opts, err := c.clientOpts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := ps.NewClient(ctx, c.Project, opts...)
	if err != nil {
		return nil, &quarantine.Error{Code: quarantine.EUNAVAILABLE, Err: err, Message: "pubsub: cannot make a client"}
	}
	return cl, nil
}
