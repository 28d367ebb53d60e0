package stub

import (
	"io"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestMain keeps the handler's logging of the failures that the tests cause
// out of their output; the tests that check logs hook logrus themselves.
func TestMain(m *testing.M) {
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}
