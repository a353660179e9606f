package mcp

// PID returns the process id of c's stdio server, or 0.
func PID(c *Client) int {
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}
