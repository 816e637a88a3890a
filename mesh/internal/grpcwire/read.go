package grpcwire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// ReadOne reads the one request message of a call whose client does not
// stream, as grpc-go's server reads it: a message of at most max bytes,
// not compressed, then the end of the request stream. A request that
// breaks the protocol gets the *Status grpc-go answers; a failed read
// (the client went away, a read deadline passed) returns the read's
// error, for the caller to name (ReadStatus).
func ReadOne(r *http.Request, max uint32) ([]byte, error) {
	var prefix [5]byte
	if _, err := io.ReadFull(r.Body, prefix[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errorf(codes.Internal, "cardinality violation: received no request message from non-client-streaming RPC")
		}
		return nil, err
	}
	switch prefix[0] {
	case 0:
	case 1:
		if enc := r.Header.Get("Grpc-Encoding"); enc == "" || enc == "identity" {
			return nil, Errorf(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		}
		return nil, Errorf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", r.Header.Get("Grpc-Encoding"))
	default:
		return nil, Errorf(codes.Internal, "grpc: received unexpected payload format %d", prefix[0])
	}
	n := binary.BigEndian.Uint32(prefix[1:])
	if n > max {
		return nil, Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, max)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	var one [1]byte
	switch _, err := io.ReadFull(r.Body, one[:]); {
	case err == nil:
		return nil, Errorf(codes.Internal, "cardinality violation: received multiple request messages for non-client-streaming RPC")
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	return msg, nil
}

// ReadStatus is the status of a request ReadOne refused or could not
// read: its *Status, INTERNAL for a truncated message, DEADLINE_EXCEEDED
// with late for a deadline, CANCELLED with failed and the error
// otherwise.
func ReadStatus(err error, late, failed string) *Status {
	var st *Status
	switch {
	case errors.As(err, &st):
		return st
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(codes.Internal, "%v", io.ErrUnexpectedEOF)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return &Status{Code: codes.DeadlineExceeded, Message: late}
	}
	return Errorf(codes.Canceled, "%s: %v", failed, err)
}

// Unmarshal decodes a request message into m, or returns the status
// grpc-go answers for one it cannot decode.
func Unmarshal(msg []byte, m proto.Message) *Status {
	if err := proto.Unmarshal(msg, m); err != nil {
		return Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}
