package unikernel

import (
	"github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/nomad/drivers/shared/eventer"
	_ "github.com/hashicorp/nomad/plugins/drivers/testutils"
	_ "github.com/hashicorp/nomad/client/lib/cpustats"
	_ "github.com/hashicorp/nomad/plugins/drivers"
	_ "github.com/hashicorp/nomad/plugins/shared/hclspec"
)

func NewPlugin(log hclog.Logger) interface{} { return nil }
