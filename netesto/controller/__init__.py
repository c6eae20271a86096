"""The controller: Lab, agent clients, and the runner that executes Actions."""
