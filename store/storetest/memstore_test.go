package storetest_test

import (
	"testing"

	"github.com/pemdev/pem/engine"
	"github.com/pemdev/pem/store/storetest"
)

func TestMemStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store { return storetest.NewMemStore() })
}
