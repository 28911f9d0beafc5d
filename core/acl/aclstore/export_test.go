package aclstore

// SetKeepChanges sets how many change nodes writers keep, until the
// returned function restores it.
func SetKeepChanges(n int) (restore func()) {
	old := keepChanges
	keepChanges = n
	return func() { keepChanges = old }
}
