package transport

// DescribeUserScramCredentials (50): v0. AlterUserScramCredentials (51): v0.
//
// Both are flexible from v0 and have only v0. Credentials live in the
// coordination store (package credentials, Kafka's /config/users/<user>
// layout) and every broker watches them, so any broker answers both (Kafka
// in ZooKeeper mode does too). Describe reads the broker's watched copy:
// right after an Alter on another broker it may lag by the watch's delay.
// Describe with no users lists every user with a credential; a user named
// without one is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
// Alter answers per user: UNACCEPTABLE_CREDENTIAL (iterations outside
// 4096-16384, empty salt or password), UNSUPPORTED_SASL_MECHANISM,
// RESOURCE_NOT_FOUND (deleting a credential that is not there),
// DUPLICATE_RESOURCE (a user and mechanism named twice). Without a
// credential store (SASLConfig.Scram nil) both answer
// UNSUPPORTED_SASL_MECHANISM.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/credentials"
)

var errNoCredentialStore = errors.New("transport: SCRAM is not enabled on this broker (no credential store)")

func handleDescribeUserScram(_ context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	st := s.cfg.SASL.Scram
	if st == nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errNoCredentialStore), errorMessage(errNoCredentialStore)
		return resp, nil
	}
	var names []string
	count := map[string]int{}
	for _, u := range req.Users {
		if count[u.Name]++; count[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	if req.Users != nil && len(req.Users) == 0 {
		return resp, nil // an empty list asks for nobody; null asks for all
	}
	for _, d := range st.Describe(names) {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = d.User
		err := d.Err
		if count[d.User] > 1 {
			err = fmt.Errorf("%w: %q", credentials.ErrDuplicate, d.User)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = s.code(err), errorMessage(err)
		} else {
			for _, in := range d.Infos {
				res.CredentialInfos = append(res.CredentialInfos, kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{
					Mechanism: int8(in.Mechanism), Iterations: int32(in.Iterations)})
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func handleAlterUserScram(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	st := s.cfg.SASL.Scram
	var dels []credentials.Deletion
	var ups []credentials.Upsert
	for _, d := range req.Deletions {
		dels = append(dels, credentials.Deletion{User: d.Name, Mechanism: credentials.Mechanism(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		ups = append(ups, credentials.Upsert{User: u.Name, Mechanism: credentials.Mechanism(u.Mechanism),
			Iterations: int(u.Iterations), Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	if st == nil {
		seen := map[string]bool{}
		for _, n := range append(namesOfDeletions(dels), namesOfUpserts(ups)...) {
			if !seen[n] {
				seen[n] = true
				resp.Results = append(resp.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: n,
					ErrorCode: kerr.UnsupportedSaslMechanism.Code, ErrorMessage: errorMessage(errNoCredentialStore)})
			}
		}
		return resp, nil
	}
	users, errs := st.Alter(ctx, dels, ups)
	for i, u := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if errs[i] != nil {
			res.ErrorCode, res.ErrorMessage = s.code(errs[i]), errorMessage(errs[i])
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func namesOfDeletions(ds []credentials.Deletion) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.User
	}
	return out
}

func namesOfUpserts(us []credentials.Upsert) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.User
	}
	return out
}
