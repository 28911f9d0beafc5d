package transport

// DescribeConfigs: v0-v4.
//
// v1 added IncludeSynonyms and each config's source (v0 says only
// is_default); v2 is v1 (throttling moved); v3 added IncludeDocumentation
// and each config's type; v4 is flexible. Resources are TOPIC (every topic
// config Kafka defines, plus weir's own: value in effect, source, synonyms,
// documentation saying which keys weir ignores) and BROKER ("" for the
// cluster-wide dynamic defaults, this broker's id for its topic defaults and
// a few read-only settings; another broker's id is INVALID_REQUEST, as in
// Kafka: clients send it to that broker). Each resource answers on its own:
// an unknown topic fails that resource only.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/core/topicconfig"
)

// errUnsupportedResource: a config resource type weir does not keep
// (BROKER_LOGGER, CLIENT_METRICS, GROUP).
var errUnsupportedResource = errors.New("transport: config resource type not supported")

func handleDescribeConfigs(ctx context.Context, s *Server, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	resp.Resources = make([]kmsg.DescribeConfigsResponseResource, len(req.Resources))
	for i, rr := range req.Resources {
		res := &resp.Resources[i]
		res.Default()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var (
			entries []topicconfig.Entry
			err     error
		)
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			entries, err = s.node.DescribeTopicConfigs(rr.ResourceName)
		case kmsg.ConfigResourceTypeBroker:
			entries, err = s.node.DescribeBrokerConfigs(rr.ResourceName)
		default:
			err = fmt.Errorf("%w: %v %q", errUnsupportedResource, rr.ResourceType, rr.ResourceName)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = s.code(err), errorMessage(err)
			continue
		}
		res.Configs = describedConfigs(entries, rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
	}
	return resp, nil
}

// describedConfigs encodes entries, only those named when names is not nil
// (a name that is no config is left out, as Kafka does).
func describedConfigs(entries []topicconfig.Entry, names []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
	for _, e := range entries {
		if names != nil && !slices.Contains(names, e.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly, c.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Sensitive
		c.Source = kmsg.ConfigSource(e.Source)
		c.IsDefault = e.Source == topicconfig.SourceDefault
		c.ConfigType = kmsg.ConfigType(e.Type)
		if docs {
			doc := e.Doc
			c.Documentation = &doc
		}
		if synonyms {
			for _, sy := range e.Synonyms {
				cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				cs.Name, cs.Value, cs.Source = sy.Name, sy.Value, kmsg.ConfigSource(sy.Source)
				c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
			}
		}
		out = append(out, c)
	}
	return out
}
