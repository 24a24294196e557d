from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    name = "orchestration"
