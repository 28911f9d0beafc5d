package record

import "errors"

// ErrCorrupt is the category of every error about bad batch bytes: each of
// ErrShort, ErrBadLength, ErrBadMagic, ErrBadCRC and ErrBadRecords satisfies
// errors.Is(err, ErrCorrupt).
var ErrCorrupt = errors.New("record: corrupt batch")

var (
	// ErrShort: b holds fewer bytes than the header, or than batchLength
	// says. At the end of a log or a fetch response this is a torn or
	// partial tail rather than damage.
	ErrShort error = &corruptError{"record: short batch"}
	// ErrBadLength: batchLength is below HeaderSize-12 (including negative),
	// or the batch is larger than the caller's limit.
	ErrBadLength error = &corruptError{"record: bad batch length"}
	// ErrBadMagic: the magic byte is not 2.
	ErrBadMagic error = &corruptError{"record: bad magic"}
	// ErrBadCRC: the stored CRC-32C does not match bytes @21..end.
	ErrBadCRC error = &corruptError{"record: bad CRC"}
	// ErrBadRecords: recordCount or lastOffsetDelta is negative, they
	// disagree where they must agree, or the records section is malformed.
	ErrBadRecords error = &corruptError{"record: bad records"}
)

// ErrCompressed is returned by Records for a compressed batch when no
// decompress function is given. It is not a corruption error.
var ErrCompressed = errors.New("record: compressed batch needs a decompressor")

// ErrBuild is returned by Build for options or records it cannot encode. It is
// not a corruption error.
var ErrBuild = errors.New("record: cannot build batch")

// corruptError is a specific corruption sentinel that also matches ErrCorrupt.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

// Is reports whether target is the corruption category.
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }
