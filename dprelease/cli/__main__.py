"""`python -m dprelease.cli`: the command line (`dprelease.cli.main`)."""

from dprelease.cli.main import main

main()
