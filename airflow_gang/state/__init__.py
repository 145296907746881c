"""What outlives a try: the task state store entries (`task_store`, `state_store`), the job
history the Gang jobs page reads (`history`), and the orphan reaper that finds jobs nobody will
wait for (`reaper`)."""
