package pluginrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	errKindFailed  = errors.New("kind: plugin failed")
	errKindInvalid = errors.New("kind: invalid spec")
	errKindCorrupt = errors.New("kind: corrupt input")
	testKind       = Kind{Name: "kind", ErrFailed: errKindFailed, ErrInvalid: errKindInvalid,
		Codes: []ErrorCode{{Err: errKindCorrupt, Code: codes.DataLoss}}}
)

// TestErrorsRoundTrip sends plugin-side errors through ToStatus and back
// through fromStatus, as a call across the boundary does.
func TestErrorsRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		want     []error
		notWant  []error
		contains string
	}{
		{"kind code", fmt.Errorf("%w: block 3", errKindCorrupt), codes.DataLoss,
			[]error{errKindCorrupt}, []error{errKindFailed}, "plugin P: Op: block 3"},
		{"factory rejection", fmt.Errorf("%w: level=9: too high", errKindInvalid), codes.InvalidArgument,
			[]error{errKindInvalid}, []error{errKindFailed}, "Op rejected the parameters: level=9: too high"},
		{"unknown instance", fmt.Errorf("%w 7", ErrUnknownInstance), codes.NotFound,
			[]error{errKindFailed, ErrUnknownInstance}, nil, "7"},
		{"plain error", errors.New("out of cheese"), codes.Unknown,
			[]error{errKindFailed}, []error{errKindCorrupt, errKindInvalid}, "Op returned an error (Unknown): out of cheese"},
		{"cancelled", fmt.Errorf("wrapped: %w", context.Canceled), codes.Canceled,
			[]error{errKindFailed}, nil, "context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(ToStatus(testKind, tc.err))
			if st.Code() != tc.code {
				t.Fatalf("ToStatus(%v) code = %v, want %v", tc.err, st.Code(), tc.code)
			}
			err := fromStatus(testKind, "P", "Op", st)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("%v does not wrap %v", err, w)
				}
			}
			for _, nw := range tc.notWant {
				if errors.Is(err, nw) {
					t.Errorf("%v wraps %v", err, nw)
				}
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("%q does not contain %q", err, tc.contains)
			}
		})
	}
	if ToStatus(testKind, nil) != nil {
		t.Error("ToStatus(nil) != nil")
	}
	if err := fromStatus(testKind, "P", "Open", status.New(codes.Unimplemented, "unknown service")); !errors.Is(err, ErrNotServed) {
		t.Errorf("Unimplemented: %v, want ErrNotServed", err)
	}
}

func TestTrimSentinel(t *testing.T) {
	s := errors.New("codec: invalid spec")
	for msg, want := range map[string]string{
		"codec: invalid spec: level=9":         "level=9",
		`codec: invalid spec "x:y=1": unknown`: `"x:y=1": unknown`,
		"something else":                       "something else",
	} {
		if got := trimSentinel(msg, s); got != want {
			t.Errorf("trimSentinel(%q) = %q, want %q", msg, got, want)
		}
	}
}
