package transport

import "testing"

// TestFrameClass: a Produce frame's class is the smallest power of two
// from minPooledFrame holding it, so a recycled frame of a class fits every
// request of that class; frames above maxPooledFrame have none.
func TestFrameClass(t *testing.T) {
	for _, n := range []int{2, 100, minPooledFrame - 1, minPooledFrame, minPooledFrame + 1, 64 << 10, 64<<10 + 1,
		3 << 20, 4 << 20, 4<<20 + 1, maxPooledFrame - 1, maxPooledFrame} {
		c, ok := frameClass(n)
		if !ok || c < 0 || c >= producePoolClasses {
			t.Fatalf("frameClass(%d) = %d, %v; want a class in [0, %d)", n, c, ok, producePoolClasses)
		}
		size := minPooledFrame << c
		if size < n || c > 0 && size/2 >= n {
			t.Errorf("frameClass(%d) = %d (%d bytes): not the smallest class holding it", n, c, size)
		}
		if got := frameCap(produceKey, n); got != size {
			t.Errorf("frameCap(produce, %d) = %d, want %d", n, got, size)
		}
		if got := frameCap(apiVersionsKey, n); got != n {
			t.Errorf("frameCap(ApiVersions, %d) = %d, want %d", n, got, n)
		}
	}
	if _, ok := frameClass(maxPooledFrame + 1); ok {
		t.Errorf("frameClass(%d): a class above maxPooledFrame", maxPooledFrame+1)
	}
}

// TestProduceFrameRecycled: a released Produce frame of its class's size
// is handed to the next Produce request of the class, a larger one than it
// was grown for too; frames of other requests are not recycled.
func TestProduceFrameRecycled(t *testing.T) {
	const first, second = 3<<20 + 12345, 4<<20 - 7 // one class: (2 MiB, 4 MiB]
	if got := frameCap(produceKey, first); got != 4<<20 {
		t.Fatalf("a Produce frame of %d bytes grows to %d, want its class's 4 MiB", first, got)
	}
	// sync.Pool may drop what it is given (always a few under -race): try
	// until it is handed back.
	for range 100 {
		f := make([]byte, first, 4<<20)
		f[0], f[1] = 0, byte(produceKey)
		releaseFrame(f)
		if g := newFrame(produceKey, second); &g[0] == &f[0] {
			if cap(g) < second {
				t.Fatalf("recycled frame of %d bytes for a request of %d", cap(g), second)
			}
			return
		}
	}
	t.Fatal("a released Produce frame of 4 MiB was never handed to a Produce request of its class")
}
