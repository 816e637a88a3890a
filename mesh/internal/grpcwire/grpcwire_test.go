package grpcwire_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/weftmesh/weft/mesh/internal/grpcwire"
)

func TestParseTimeoutReadsEveryUnitAndRefusesTheRest(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1H": time.Hour, "2M": 2 * time.Minute, "3S": 3 * time.Second, "4m": 4 * time.Millisecond,
		"5u": 5 * time.Microsecond, "6n": 6, "99999999H": time.Duration(1<<63 - 1),
	} {
		got, err := grpcwire.ParseTimeout(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "S", "1", "1x", "+1S", "-1S", "123456789S", "1.5S"} {
		_, err := grpcwire.ParseTimeout(v)
		assert.Error(t, err, "%q", v)
	}
}

func TestEncodeMessagePercentEncodesWhatIsNotPrintableASCII(t *testing.T) {
	assert.Equal(t, "plain text", grpcwire.EncodeMessage("plain text"))
	assert.Equal(t, "100%25 caf%C3%A9%0A", grpcwire.EncodeMessage("100% café\n"))
}

func TestUnknownMethodNamesWhatIsUnknownAsGRPCGoDoes(t *testing.T) {
	assert.Equal(t, `unknown method Get for service a.B`, grpcwire.UnknownMethod("/a.B/Get", "a.B").Message)
	assert.Equal(t, `unknown service c.D`, grpcwire.UnknownMethod("/c.D/Get", "a.B").Message)
	assert.Equal(t, `malformed method name: "nothing"`, grpcwire.UnknownMethod("nothing", "a.B").Message)
	assert.Equal(t, codes.Unimplemented, grpcwire.UnknownMethod("/c.D/Get", "a.B").Code)
}

func TestReadOneTakesExactlyOneMessageUnderTheCap(t *testing.T) {
	msg := []byte("hello")
	one := grpcwire.AppendMessage(nil, msg)
	cases := []struct {
		name string
		body []byte
		code codes.Code // OK: read
	}{
		{"one message", one, codes.OK},
		{"none", nil, codes.Internal},
		{"two", append(append([]byte{}, one...), one...), codes.Internal},
		{"over the cap", grpcwire.AppendMessage(nil, make([]byte, 9)), codes.ResourceExhausted},
		{"compressed without an encoding", append([]byte{1}, one[1:]...), codes.Internal},
		{"an unknown flag", append([]byte{7}, one[1:]...), codes.Internal},
		{"truncated", one[:7], codes.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/a.B/Get", bytes.NewReader(tc.body))
			got, err := grpcwire.ReadOne(r, 8)
			if tc.code == codes.OK {
				require.NoError(t, err)
				assert.Equal(t, msg, got)
				return
			}
			assert.Equal(t, tc.code, grpcwire.ReadStatus(err, "late", "failed").Code, "%v", err)
		})
	}
}

func TestFinishSendsTrailersOnlyBeforeAnyMessageAndTrailersAfter(t *testing.T) {
	w := httptest.NewRecorder()
	grpcwire.NewResponse(w).Finish(grpcwire.Errorf(codes.NotFound, "no %s", "such"))
	assert.Equal(t, "5", w.Header().Get("Grpc-Status"))
	assert.Equal(t, "no such", w.Header().Get("Grpc-Message"))
	assert.Equal(t, grpcwire.ContentType, w.Header().Get("Content-Type"))

	w = httptest.NewRecorder()
	resp := grpcwire.NewResponse(w)
	buf := make([]byte, 5, 10)
	buf = append(buf, "hello"...)
	grpcwire.PutPrefix(buf)
	require.NoError(t, resp.Write(buf))
	resp.Finish(nil)
	res := w.Result()
	assert.Empty(t, res.Header.Get("Grpc-Status"), "the status is not in the head")
	assert.Equal(t, "0", res.Trailer.Get("Grpc-Status"))
	assert.Equal(t, grpcwire.AppendMessage(nil, []byte("hello")), w.Body.Bytes())
}
