package sqs

import (
	"context"
	"errors"

	"github.com/aws/smithy-go"

	"github.com/quarantine-dev/quarantine"
)

// translate turns an SDK error of operation op into a *quarantine.Error:
// the one place this package interprets the SDK's errors. A missing queue
// is ENOTFOUND, refused credentials EUNAUTHORIZED or EFORBIDDEN, another
// client fault EINVALID, and anything else (network, server, timeout)
// EUNAVAILABLE. The cause is kept in Err for the logs.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	var qe *quarantine.Error
	if errors.As(err, &qe) {
		return err
	}
	e := &quarantine.Error{Code: quarantine.EUNAVAILABLE, Message: "sqs: " + op + ": the broker cannot be reached", Err: err}
	var api smithy.APIError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.Message = "sqs: " + op + ": cancelled or timed out"
	case errors.As(err, &api):
		code := api.ErrorCode()
		e.Message = "sqs: " + op + ": " + code
		switch code {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
			e.Code = quarantine.ENOTFOUND
			e.Message = "sqs: " + op + ": the queue does not exist"
		case "AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException":
			e.Code = quarantine.EFORBIDDEN
		case "InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClientException",
			"ExpiredToken", "InvalidAccessKeyId", "MissingAuthenticationToken", "InvalidSecurity":
			e.Code = quarantine.EUNAUTHORIZED
		case "RequestThrottled", "ThrottlingException", "OverLimit", "KMS.ThrottlingException":
			// stays EUNAVAILABLE: back off and retry
		default:
			if api.ErrorFault() == smithy.FaultClient {
				e.Code = quarantine.EINVALID
			}
		}
	}
	return e
}
