from django.apps import AppConfig


class SagasConfig(AppConfig):
    name = "sagas"
    verbose_name = "Sagas"
