package assignor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func tid(n byte) [16]byte { return [16]byte{15: n} }

// randomSpec makes members subscribed to random topics (all to every topic
// when homogeneous), with an optional current assignment.
func randomSpec(rng *rand.Rand, homogeneous bool) Spec {
	s := Spec{Topics: map[[16]byte]Topic{}}
	nt := 1 + rng.IntN(4)
	for i := range nt {
		id := tid(byte(i + 1))
		s.Topics[id] = Topic{ID: id, Name: fmt.Sprintf("t%d", i), Partitions: int32(rng.IntN(13))}
	}
	nm := 1 + rng.IntN(7)
	for i := range nm {
		m := Member{ID: fmt.Sprintf("m%02d", rng.IntN(100)*10+i)}
		for j := range nt {
			if homogeneous || rng.IntN(2) == 0 {
				m.Topics = append(m.Topics, tid(byte(j+1)))
			}
		}
		if !homogeneous && rng.IntN(4) == 0 {
			m.Topics = append(m.Topics, tid(99)) // a topic that does not exist
		}
		s.Members = append(s.Members, m)
	}
	return s
}

// checkValid asserts every partition of a subscribed topic is assigned to
// exactly one subscriber, and nothing else is assigned.
func checkValid(t *testing.T, s Spec, a Assignment) map[string]int {
	t.Helper()
	owner := map[tp]string{}
	load := map[string]int{}
	if len(a) != len(s.Members) {
		t.Fatalf("assignment has %d members, spec %d", len(a), len(s.Members))
	}
	for _, m := range s.Members {
		ma, ok := a[m.ID]
		if !ok {
			t.Fatalf("member %s missing", m.ID)
		}
		for id, ps := range ma {
			top, ok := s.Topics[id]
			if !ok || !subscribes(m, id) {
				t.Fatalf("%s got topic %x it does not subscribe to", m.ID, id)
			}
			if !slices.IsSorted(ps) || len(ps) == 0 {
				t.Fatalf("%s: partitions %v not sorted or empty", m.ID, ps)
			}
			for _, p := range ps {
				if p < 0 || p >= top.Partitions {
					t.Fatalf("%s got %s-%d of %d partitions", m.ID, top.Name, p, top.Partitions)
				}
				if o, dup := owner[tp{id, p}]; dup {
					t.Fatalf("%s-%d assigned to %s and %s", top.Name, p, o, m.ID)
				}
				owner[tp{id, p}] = m.ID
				load[m.ID]++
			}
		}
	}
	for id, top := range s.Topics {
		sub := false
		for _, m := range s.Members {
			sub = sub || subscribes(m, id)
		}
		for p := range top.Partitions {
			if _, ok := owner[tp{id, p}]; sub && !ok {
				t.Fatalf("%s-%d subscribed but unassigned", top.Name, p)
			}
		}
	}
	return load
}

func spread(load map[string]int, s Spec) (lo, hi int) {
	lo = -1
	for _, m := range s.Members {
		l := load[m.ID]
		if lo < 0 || l < lo {
			lo = l
		}
		hi = max(hi, l)
	}
	return lo, hi
}

func withCurrent(s Spec, a Assignment) Spec {
	out := Spec{Topics: s.Topics}
	for _, m := range s.Members {
		m.Current = a[m.ID]
		out.Members = append(out.Members, m)
	}
	return out
}

// TestAssignorsValidAndDeterministic: both assignors, random specs (some
// with a random, even conflicting, current assignment): every subscribed
// partition has exactly one subscribed owner, the answer does not depend on
// the order of the members, and assigning again from the answer changes
// nothing.
func TestAssignorsValidAndDeterministic(t *testing.T) {
	for _, as := range []Assignor{Uniform, Range} {
		t.Run(as.Name(), func(t *testing.T) {
			for seed := range uint64(500) {
				rng := rand.New(rand.NewPCG(seed, 7))
				s := randomSpec(rng, rng.IntN(2) == 0)
				if rng.IntN(2) == 0 {
					for i := range s.Members {
						s.Members[i].Current = map[[16]byte][]int32{}
						for id, top := range s.Topics {
							for p := range top.Partitions + 2 {
								if rng.IntN(3) == 0 {
									s.Members[i].Current[id] = append(s.Members[i].Current[id], p)
								}
							}
						}
					}
				}
				a := as.Assign(s)
				checkValid(t, s, a)
				shuffled := Spec{Topics: s.Topics, Members: slices.Clone(s.Members)}
				rng.Shuffle(len(shuffled.Members), func(i, j int) {
					shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
				})
				if b := as.Assign(shuffled); !reflect.DeepEqual(a, b) {
					t.Fatalf("seed %d: member order changed the assignment:\n%v\n%v", seed, a, b)
				}
				if b := as.Assign(withCurrent(s, a)); !reflect.DeepEqual(a, b) {
					t.Fatalf("seed %d: reassigning from the answer changed it:\n%v\n%v", seed, a, b)
				}
			}
		})
	}
}

// TestUniformBalanced: with identical subscriptions the counts differ by at
// most one, from scratch and from any current assignment.
func TestUniformBalanced(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 8))
		s := randomSpec(rng, true)
		if seed%2 == 1 { // everything currently on one member
			all := map[[16]byte][]int32{}
			for id, top := range s.Topics {
				for p := range top.Partitions {
					all[id] = append(all[id], p)
				}
			}
			s.Members[0].Current = all
		}
		lo, hi := spread(checkValid(t, s, Uniform.Assign(s)), s)
		if hi-lo > 1 {
			t.Fatalf("seed %d: loads from %d to %d", seed, lo, hi)
		}
	}
}

// TestUniformHeterogeneousNoObviousImbalance: with different subscriptions,
// no partition could move to a subscriber holding two fewer.
func TestUniformHeterogeneousNoObviousImbalance(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 9))
		s := randomSpec(rng, false)
		a := Uniform.Assign(s)
		load := checkValid(t, s, a)
		for _, m := range s.Members {
			for id := range a[m.ID] {
				for _, o := range s.Members {
					if subscribes(o, id) && load[o.ID] <= load[m.ID]-2 {
						t.Fatalf("seed %d: %s (%d) holds topic %x, subscriber %s has %d", seed, m.ID, load[m.ID], id, o.ID, load[o.ID])
					}
				}
			}
		}
	}
}

// TestUniformSticky: when a member joins a balanced group, the old members
// only give partitions to it (none move between them), and when one leaves,
// only its partitions move.
func TestUniformSticky(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 10))
		s := randomSpec(rng, true)
		a := Uniform.Assign(s)

		joined := withCurrent(s, a)
		joined.Members = append(joined.Members, Member{ID: "new", Topics: slices.Collect(maps.Keys(s.Topics))})
		b := Uniform.Assign(joined)
		checkValid(t, joined, b)
		for _, m := range s.Members {
			for id, ps := range b[m.ID] {
				for _, p := range ps {
					if !slices.Contains(a[m.ID][id], p) {
						t.Fatalf("seed %d: %s gained %x-%d when a member joined", seed, m.ID, id, p)
					}
				}
			}
		}

		if len(s.Members) < 2 {
			continue
		}
		left := withCurrent(s, a)
		gone := left.Members[0].ID
		left.Members = left.Members[1:]
		c := Uniform.Assign(left)
		checkValid(t, left, c)
		for _, m := range left.Members {
			for id, ps := range a[m.ID] {
				for _, p := range ps {
					if !slices.Contains(c[m.ID][id], p) {
						t.Fatalf("seed %d: %s lost %x-%d when %s left", seed, m.ID, id, p, gone)
					}
				}
			}
		}
	}
}

// TestRangeRanges: from scratch, members get contiguous ranges in member id
// order, the first ones one partition more, and members with the same
// subscription get the same partition numbers of topics with the same count.
func TestRangeRanges(t *testing.T) {
	s := Spec{Topics: map[[16]byte]Topic{
		tid(1): {ID: tid(1), Name: "a", Partitions: 7},
		tid(2): {ID: tid(2), Name: "b", Partitions: 7},
	}}
	for _, id := range []string{"m3", "m1", "m2"} {
		s.Members = append(s.Members, Member{ID: id, Topics: [][16]byte{tid(1), tid(2)}})
	}
	a := Range.Assign(s)
	want := map[string][]int32{"m1": {0, 1, 2}, "m2": {3, 4}, "m3": {5, 6}}
	for m, ps := range want {
		for _, topic := range []byte{1, 2} {
			if got := a[m][tid(topic)]; !slices.Equal(got, ps) {
				t.Errorf("%s topic %d: got %v, want %v", m, topic, got, ps)
			}
		}
	}
	// A fourth member takes only what the quotas free (7/4: 2,2,2,1).
	b := Range.Assign(withCurrent(Spec{Topics: s.Topics, Members: append(slices.Clone(s.Members),
		Member{ID: "m4", Topics: [][16]byte{tid(1), tid(2)}})}, a))
	wantB := map[string][]int32{"m1": {0, 1}, "m2": {3, 4}, "m3": {5, 6}, "m4": {2}}
	for m, ps := range wantB {
		if got := b[m][tid(1)]; !slices.Equal(got, ps) {
			t.Errorf("after a join, %s: got %v, want %v", m, got, ps)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, n := range Names() {
		if a, ok := Lookup(n); !ok || a.Name() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, a, ok)
		}
	}
	if _, ok := Lookup("sticky"); ok {
		t.Error("Lookup(sticky) found an assignor")
	}
}

func BenchmarkUniform(b *testing.B) {
	s := Spec{Topics: map[[16]byte]Topic{}}
	for i := range 10 {
		s.Topics[tid(byte(i+1))] = Topic{ID: tid(byte(i + 1)), Name: fmt.Sprint(i), Partitions: 100}
	}
	for i := range 50 {
		s.Members = append(s.Members, Member{ID: fmt.Sprint(i), Topics: slices.Collect(maps.Keys(s.Topics))})
	}
	a := Uniform.Assign(s)
	s = withCurrent(s, a)
	s.Members = append(s.Members, Member{ID: "new", Topics: slices.Collect(maps.Keys(s.Topics))})
	for b.Loop() {
		Uniform.Assign(s)
	}
}
