package transport

// ApiVersions: v0-v4.
//
// Every client opens with it, usually at a version newer than ours: a version
// not served gets a v0-shaped body (error UNSUPPORTED_VERSION plus the ranges,
// always with response header v0) so the client retries with one we serve.
// v3 made the request flexible (client software name and version, ignored);
// v4 changed nothing but the error semantics above. v5 (cluster and node
// check) is not served. The ranges come from the one registry in versions.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleApiVersions(_ context.Context, _ *Server, r *request) (kmsg.Response, error) {
	resp := r.body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys
	return resp, nil
}

// unsupportedApiVersions is the answer to an ApiVersions version we do not
// serve: v0-shaped, error 35, listing every range.
func unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys
	return resp
}
