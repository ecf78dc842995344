module github.com/fluidvim/fluidvim/nomad_driver

go 1.25
