import AppBundle
