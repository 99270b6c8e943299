package sqs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"

	"github.com/quarantine-dev/quarantine"
)

// emulatorCredentials sign requests to an endpoint override when the
// environment has no credentials: emulators check none.
var emulatorCredentials = credentials.NewStaticCredentialsProvider("quarantine", "quarantine", "")

// newClient builds an SQS client for c (validated). It reads the AWS
// configuration (environment, shared files) but does not dial.
//
// With ProtocolQuery the client speaks the query protocol (goaws speaks
// nothing else). The SDK's checksum validation of received bodies is off:
// it fails a whole ReceiveMessage call on one bad message, which would
// block the queue; the decoder checks each body's MD5 instead.
func newClient(ctx context.Context, c Config, log *slog.Logger) (*awssqs.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(c.Region),
		awsconfig.WithLogger(sdkLogger{log}),
		awsconfig.WithHTTPClient(httpClient(c.Receivers)),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxBackoff = 2 * time.Second
				// No retry quota: after an outage, acks must still be retried.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if c.Endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(emulatorCredentials))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &quarantine.Error{Code: quarantine.EINVALID, Message: "sqs: cannot load the AWS configuration", Err: err}
	}
	return awssqs.NewFromConfig(cfg, func(o *awssqs.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		if c.Protocol == ProtocolQuery {
			o.Protocol = awsquery.New(schemas.AmazonSQS)
		}
		o.DisableMessageChecksumValidation = true
		o.HTTPClient = ownBodyClient{o.HTTPClient}
	}), nil
}

// sdkLogger sends the SDK's own log lines (a connection not reused after
// a cancelled long poll, and the like) to slog at debug level: the errors
// that matter reach the caller as errors.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("aws sdk: "+fmt.Sprintf(format, v...), "classification", string(c))
	}
}

// ownBodyClient gives the transport its own copy of each request body.
//
// The SDK closes the body it built as soon as Do returns, while the
// transport's writer may still be finishing with it; the transport then
// closes the connection under the response being read, the call fails
// with "use of closed network connection" and the SDK retries it
// (aws/aws-sdk-go-v2#2737). For ReceiveMessage that retry is harmful: the
// messages of the lost response stay invisible for a whole visibility
// timeout. Against goaws this hit several calls in a hundred; with a
// private copy of the body (a few hundred bytes here) it never does.
type ownBodyClient struct{ next awssqs.HTTPClient }

func (c ownBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return c.next.Do(r)
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.ContentLength = int64(len(b))
	return c.next.Do(r)
}

// httpClient keeps enough idle connections for every receiver plus the
// concurrent acks and extensions, and bounds connection set-up.
func httpClient(receivers int) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = 5 * time.Second }).
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = receivers + ackParallel + extendParallel + 8
			t.MaxIdleConnsPerHost = t.MaxIdleConns
		})
}
