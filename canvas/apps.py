from django.apps import AppConfig


class CanvasConfig(AppConfig):
    name = "canvas"
