package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAssignKafkaExample checks assign against the example in the Javadoc of
// Kafka's AdminUtils.assignReplicasToBrokers: five brokers, ten partitions,
// three replicas, start index 0 and shift 0 (fixedStartIndex 0).
func TestAssignKafkaExample(t *testing.T) {
	want := [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		// From the sixth partition on, followers shift by one more.
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}
	if got := assign([]int32{0, 1, 2, 3, 4}, 10, 3, 0, 0); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Broker ids are sorted (and made distinct) first, as
	// AdminZkClient.getBrokerMetadatas does.
	for seed := range uint64(10) {
		a, err := Assign([]int32{40, 0, 30, 10, 30, 20}, 10, 3, rand.New(rand.NewPCG(seed, 0)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Assign([]int32{0, 10, 20, 30, 40}, 10, 3, rand.New(rand.NewPCG(seed, 0)))
		if !slices.EqualFunc(a, b, slices.Equal) {
			t.Fatalf("seed %d: unsorted ids gave %v, sorted ones %v", seed, a, b)
		}
	}
}

func TestAssignDistribution(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 7; n++ {
		brokers := make([]int32, n)
		for i := range brokers {
			brokers[i] = int32(100 + 3*i)
		}
		for rf := 1; rf <= n; rf++ {
			for _, partitions := range []int{1, 2, n - 1, n, n + 1, 2 * n, 3*n + 2, 50, 7 * n} {
				if partitions < 1 {
					continue
				}
				name := fmt.Sprintf("brokers=%d rf=%d partitions=%d", n, rf, partitions)
				asg, err := Assign(brokers, int32(partitions), int16(rf), rnd)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkAssignment(t, name, asg, brokers, partitions, rf)
			}
		}
	}
}

// checkAssignment asserts the shape of an assignment and its balance: each
// broker leads ⌊p/n⌋ or ⌈p/n⌉ partitions; replica counts differ by at most
// rf, and not at all when the partitions fill whole rounds of n.
func checkAssignment(t *testing.T, name string, asg [][]int32, brokers []int32, partitions, rf int) {
	t.Helper()
	if len(asg) != partitions {
		t.Fatalf("%s: %d partitions", name, len(asg))
	}
	leads, hosts := map[int32]int{}, map[int32]int{}
	for p, replicas := range asg {
		if len(replicas) != rf {
			t.Fatalf("%s: partition %d has replicas %v", name, p, replicas)
		}
		for i, r := range replicas {
			if !slices.Contains(brokers, r) || slices.Contains(replicas[:i], r) {
				t.Fatalf("%s: partition %d has replicas %v", name, p, replicas)
			}
			hosts[r]++
		}
		leads[replicas[0]]++
	}
	n := len(brokers)
	lo, hi := minMax(leads, brokers)
	if lo != partitions/n || hi != (partitions+n-1)/n {
		t.Fatalf("%s: brokers lead %d to %d partitions, want %d to %d", name, lo, hi, partitions/n, (partitions+n-1)/n)
	}
	lo, hi = minMax(hosts, brokers)
	if hi-lo > rf || partitions%n == 0 && hi != lo {
		t.Fatalf("%s: brokers host %d to %d replicas", name, lo, hi)
	}
}

func minMax(count map[int32]int, brokers []int32) (lo, hi int) {
	lo = count[brokers[0]]
	for _, b := range brokers {
		lo, hi = min(lo, count[b]), max(hi, count[b])
	}
	return lo, hi
}

func TestAssignSeeded(t *testing.T) {
	brokers := []int32{1, 2, 3, 4, 5}
	run := func(seed uint64) [][]int32 {
		asg, err := Assign(brokers, 12, 3, rand.New(rand.NewPCG(seed, 0)))
		if err != nil {
			t.Fatal(err)
		}
		return asg
	}
	first := run(7)
	if again := run(7); !slices.EqualFunc(first, again, slices.Equal) {
		t.Fatalf("seed 7 gave %v, then %v", first, again)
	}
	// The start and the shift are random: other seeds place differently.
	differ := 0
	for seed := range uint64(20) {
		if !slices.EqualFunc(first, run(seed+100), slices.Equal) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("20 seeds gave one assignment")
	}
}

func TestAssignRefuses(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		brokers    []int32
		partitions int32
		rf         int16
		want       error
	}{
		{[]int32{1, 2}, 1, 3, ErrInvalidReplicationFactor},
		{[]int32{1, 1, 2}, 1, 3, ErrInvalidReplicationFactor}, // duplicates count once
		{[]int32{1, 2}, 1, 0, ErrInvalidReplicationFactor},
		{[]int32{1, 2}, 1, -1, ErrInvalidReplicationFactor},
		{nil, 1, 1, ErrInvalidReplicationFactor},
		{[]int32{1, 2}, 0, 1, ErrInvalidPartitions},
		{[]int32{1, 2}, -3, 1, ErrInvalidPartitions},
	} {
		asg, err := Assign(c.brokers, c.partitions, c.rf, rnd)
		wantErrIs(t, fmt.Sprintf("Assign(%v, %d, %d)", c.brokers, c.partitions, c.rf), err, c.want)
		if asg != nil {
			t.Fatalf("an assignment with an error: %v", asg)
		}
	}
}

func TestValidateAssignment(t *testing.T) {
	brokers := []int32{1, 2, 3}
	pr := func(p int32, replicas ...int32) PartitionReplicas { return PartitionReplicas{p, replicas} }
	got, err := ValidateAssignment([]PartitionReplicas{pr(1, 3, 1), pr(0, 1, 2), pr(2, 2, 3)}, brokers)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int32{{1, 2}, {3, 1}, {2, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for name, parts := range map[string][]PartitionReplicas{
		"none":                    nil,
		"a gap":                   {pr(0, 1), pr(2, 2)},
		"a partition twice":       {pr(0, 1), pr(0, 2)},
		"a negative partition":    {pr(-1, 1)},
		"no replicas":             {pr(0)},
		"a broker twice":          {pr(0, 1, 1)},
		"an unknown broker":       {pr(0, 1, 4)},
		"mixed replication":       {pr(0, 1, 2), pr(1, 3)},
		"mixed replication, late": {pr(0, 1), pr(1, 2, 3)},
	} {
		asg, err := ValidateAssignment(parts, brokers)
		wantErrIs(t, name, err, ErrInvalidReplicaAssignment)
		if asg != nil {
			t.Fatalf("%s: an assignment with an error: %v", name, asg)
		}
	}
}
