package transport

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The security APIs' version cases, on TestEveryServedVersion's PLAINTEXT
// listener without SASL nor a credential store: each is answered with the
// error Kafka gives there, and the connection stays open.
func init() {
	versionCases[saslHandshakeKey] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.SASLHandshakeRequest{Version: v, Mechanism: MechanismPlain}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.SASLHandshakeResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.IllegalSaslState.Code },
	}
	versionCases[saslAuthenticateKey] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.SASLAuthenticateRequest{Version: v, SASLAuthBytes: []byte("\x00u\x00p")}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.SASLAuthenticateResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.IllegalSaslState.Code },
	}
	versionCases[50] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.DescribeUserSCRAMCredentialsRequest{Version: v}
		},
		errorOf: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode },
		want:    func(int16) int16 { return kerr.UnsupportedSaslMechanism.Code },
	}
	versionCases[51] = versionCase{
		build: func(t testing.TB, v int16) kmsg.Request {
			return &kmsg.AlterUserSCRAMCredentialsRequest{Version: v,
				Deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "u", Mechanism: 1}}}
		},
		errorOf: func(r kmsg.Response) int16 {
			return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
		},
		want: func(int16) int16 { return kerr.UnsupportedSaslMechanism.Code },
	}
}
