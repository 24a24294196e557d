"""Automations: signed webhooks (and, later, cron schedules) that start agent runs."""
