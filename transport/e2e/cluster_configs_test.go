package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/transport/broker/brokertest"
)

// describeConfig asks the broker at addr for one config of a resource and
// returns its value and source.
func describeConfig(ctx context.Context, addr string, typ kmsg.ConfigResourceType, name, key string) (string, kmsg.ConfigSource, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, []string{key}
	req.Resources = append(req.Resources, r)
	resp, err := pin(addr).ask(ctx, req)
	if err != nil {
		return "", 0, err
	}
	res := resp.(*kmsg.DescribeConfigsResponse).Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return "", 0, err
	}
	if len(res.Configs) != 1 || res.Configs[0].Value == nil {
		return "", 0, fmt.Errorf("%s: %+v", key, res.Configs)
	}
	return *res.Configs[0].Value, res.Configs[0].Source, nil
}

// alterConfig sets one config through the broker at addr
// (IncrementalAlterConfigs).
func alterConfig(t *testing.T, addr string, typ kmsg.ConfigResourceType, name, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := pin(addr).ask(testContext(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if res := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; res.ErrorCode != 0 {
		t.Fatalf("alter %s=%s of %s: %v %v", key, value, name, kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
	}
}

// TestClusterConfigs: on a cluster of three brokers on a real ZooKeeper, a
// topic config altered through broker 1 is described by brokers 2 and 3
// and applied by the leader on broker 2 (a smaller max.message.bytes
// refuses a batch it took before); a cluster-wide broker default altered
// through broker 3 is described as such by broker 1.
func TestClusterConfigs(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	awaitCluster(t, c, 1, 2, 3)
	ctx := testContext(t)
	const topic = "cluster-configs"
	leaders := createClusterTopic(t, c.Member(1).Addr, topic, 6)
	on2 := slices.Index(leaders, 2)
	if on2 < 0 {
		t.Fatalf("no partition led by broker 2: %v", leaders)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Member(1).Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := &kgo.Record{Topic: topic, Partition: int32(on2), Value: make([]byte, 500)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatalf("500 bytes to partition %d before: %v", on2, err)
	}

	alterConfig(t, c.Member(1).Addr, kmsg.ConfigResourceTypeTopic, topic, "max.message.bytes", "200")
	for _, id := range []int32{2, 3} {
		eventually(t, waitTimeout, fmt.Sprintf("broker %d to describe max.message.bytes=200", id), func() (bool, string) {
			v, src, err := describeConfig(ctx, c.Member(id).Addr, kmsg.ConfigResourceTypeTopic, topic, "max.message.bytes")
			return err == nil && v == "200" && src == kmsg.ConfigSourceDynamicTopicConfig, fmt.Sprint(v, src, err)
		})
	}
	eventually(t, waitTimeout, "broker 2 to refuse 500 bytes", func() (bool, string) {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(on2), Value: make([]byte, 500)}).FirstErr()
		return errors.Is(err, kerr.MessageTooLarge), fmt.Sprint(err)
	})

	alterConfig(t, c.Member(3).Addr, kmsg.ConfigResourceTypeBroker, "", "log.retention.ms", "3600000")
	eventually(t, waitTimeout, "broker 1 to describe the cluster default", func() (bool, string) {
		v, src, err := describeConfig(ctx, c.Member(1).Addr, kmsg.ConfigResourceTypeTopic, topic, "retention.ms")
		return err == nil && v == "3600000" && src == kmsg.ConfigSourceDynamicDefaultBrokerConfig, fmt.Sprint(v, src, err)
	})
}
